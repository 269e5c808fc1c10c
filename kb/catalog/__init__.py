"""The message catalog: error message templates mined from the sources that print them.

Each template is the literal text of one message with holes where the program puts values
("index_add_(): self ({}) and source ({}) must have the same scalar type"), with the project,
version, file, function and op it comes from. `matcher` reads a log line as a template (holes
captured) even when the line is cut, lower-cased, wrapped or printed without its exception
prefix; `families` says which kb entry a template belongs to; `coverage` counts both.

Pure Python: nothing here imports torch, and nothing from the rest of kb but `kb.paths`.
"""

from __future__ import annotations

__all__ = ["Hole", "Template", "format_parts", "parse_text"]

from .template import Hole, Template, format_parts, parse_text
