"""A whole job: several streams (ranks, launcher, error files, Flight Recorder dumps) -> one verdict."""
