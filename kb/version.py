"""kb's version: one place, read by the package, the entry cache key and the wheel."""

__version__ = "0.3.0"
