"""What the full-text index (kb.knowledge.index) holds of each entry, and the key it is named by.
Apart from the index, which imports the knowledge base: the entry cache works the key out when it
is made (kb.knowledge.base), so a lookup that needs the index does not read every entry's
details to name it."""

from __future__ import annotations

import re
from collections.abc import Iterable

from kb.model.entry import Entry

_REGEX_NOISE = re.compile(r"\(\?P<\w+>|\(\?:|\\[dswDSWb]|[\\^$*+?{}\[\]()|]")
_INDEX_FORMAT = "1"


def compute_key(entries: Iterable[Entry]) -> str:
    """A hash of exactly the text the index holds (each entry's id, title, wordings, summary and
    causes)."""
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    h.update(_INDEX_FORMAT.encode())
    for doc in documents(entries):
        h.update("\0".join(doc.values()).encode("utf-8", "surrogatepass") + b"\1")
    return h.hexdigest()


def documents(entries: Iterable[Entry]) -> list[dict[str, str]]:
    out = []
    for e in entries:
        causes = " ".join(f"{c.title} {c.detail}" for c in e.causes)
        out.append(
            {
                "id": e.id,
                "title": e.title,
                "wording": wording_text(e),
                "summary": e.summary,
                "causes": causes,
            }
        )
    return out


def wording_text(entry: Entry) -> str:
    sigs = " ".join(_REGEX_NOISE.sub(" ", s.pattern) for s in entry.signatures)
    return sigs + "\n" + "\n".join(entry.examples_match)
