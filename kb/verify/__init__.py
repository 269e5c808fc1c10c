"""Running entries' repros in isolated processes and judging them by the same lookup."""
