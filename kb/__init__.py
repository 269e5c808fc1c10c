"""kb: a knowledge base of PyTorch and CUDA failures.

    >>> import kb
    >>> kb.lookup("RuntimeError: CUDA error: an illegal memory access was encountered")[0].id
    'cuda-illegal-memory-access'

Importing kb is cheap and never imports torch or textual.
"""

__version__ = "0.1.0"


def lookup(text, top: int = 5, kb_dirs=None):
    """Entries matching an error message or log, best first (a list of kb.model.Match)."""
    from .lookup import lookup_text

    return lookup_text(text, top=top, kb_dirs=kb_dirs).matches


def load(kb_dirs=None):
    """The knowledge base (bundled entries plus the user's folders)."""
    from .knowledge import load as _load

    return _load(kb_dirs)
