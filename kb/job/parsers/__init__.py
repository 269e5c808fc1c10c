"""Readers of the files a job leaves beside its logs."""
