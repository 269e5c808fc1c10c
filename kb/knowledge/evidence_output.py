"""What an evidence record keeps of a repro's output: enough for the lookup to be run on it again.

A record's `matched` lines are cut short for reading, and a cut line may no longer match its
signature; the record therefore also keeps the output itself. Most repros print a traceback of a
few kilobytes, kept whole. A longer output (a collective's watchdog dump, a compiler's log) keeps
the lines the entry's signatures matched, with a few lines around each, then the output's end, so
that a record stays small and still holds the wording that proved the entry.
"""

from __future__ import annotations

OUTPUT_KEPT = 6000  # characters of a repro's output a record keeps
AROUND = 3  # lines kept before and after each matched line
GAP = "[...]"  # stands where lines were left out


def output_excerpt(output: str, shown: tuple[str, ...] = (), limit: int = OUTPUT_KEPT) -> str:
    """`output` whole when it fits in `limit` characters (blanks at line ends dropped); else the lines `shown` (the record's
    matched lines, possibly cut short with '...') with their neighbours, then as much of the end
    as fits, with GAP lines where lines were left out."""
    # Blanks at line ends are dropped: they never decide a match, and without them a record
    # shows the output as a YAML block, line by line.
    lines = [ln.rstrip() for ln in output.rstrip().splitlines()]
    text = "\n".join(lines)
    if len(text) <= limit:
        return text
    hits: set[int] = set()
    keep: set[int] = set()
    for short in shown:
        # A matched line is the output line stripped, cut at a fixed width with '...': its start
        # finds it again (the first such line, as the judge keeps the first of equal lines).
        head = short[:-3] if short.endswith("...") else short
        head = head[:120]
        at = next((i for i, ln in enumerate(lines) if head and ln.strip().startswith(head)), None)
        if at is not None:
            hits.add(at)
            keep.update(range(max(0, at - AROUND), min(len(lines), at + AROUND + 1)))
    size = sum(len(lines[i]) + 1 for i in keep)
    if size > limit:  # the matched lines alone are long: keep them without their neighbours
        keep = set(hits)
        size = sum(len(lines[i]) + 1 for i in keep)
    # Then the end of the output, where the exception a user reads is, while it fits.
    for i in range(len(lines) - 1, -1, -1):
        if i in keep:
            continue
        if size + len(lines[i]) + 1 > limit:
            break
        keep.add(i)
        size += len(lines[i]) + 1
    out: list[str] = []
    last = -1
    for i in sorted(keep):
        if i != last + 1:
            out.append(GAP)
        out.append(lines[i][:limit])
        last = i
    if last != len(lines) - 1:
        out.append(GAP)
    return "\n".join(out)
