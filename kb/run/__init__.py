"""`kb run`: a job run with the cheap evidence switched on."""
