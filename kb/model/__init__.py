"""Typed, frozen records of entries and results: no I/O."""
