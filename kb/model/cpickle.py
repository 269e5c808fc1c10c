"""pickle's C module, without the pure-Python `pickle` around it.

kb's caches are read with loads() and written with a Pickler subclass; both are _pickle's own.
`import pickle` would add about 2 ms to every cold lookup (its pure-Python Pickler and
Unpickler, their opcode tables, struct, re-exports) for names kb never uses. An interpreter
without _pickle (PyPy) gets the pure-Python module, which has the same names.
"""

from __future__ import annotations

try:
    import _pickle as pickle
except ImportError:  # pragma: no cover - CPython always has it
    import pickle  # type: ignore[no-redef]

__all__ = ["pickle"]
