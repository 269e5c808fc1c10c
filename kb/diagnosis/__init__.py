"""One stream's lookup: signatures, codes, facts, diagnosis, order of matches."""
