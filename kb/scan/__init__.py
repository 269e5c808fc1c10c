"""Reading logs: files, pipes, gzip, huge logs, prefixes and wrapped lines -> candidate lines."""
