"""`kb list`: every entry, with a column per GPU kind the evidence records name (what the newest
record of that kind saw, and when) or, with --json, one object per entry (docs/json.md)."""

from __future__ import annotations

import argparse
import json
import sys

import kb.render.style as render
from kb.exit_codes import OK as EXIT_OK
from kb.knowledge.base import load
from kb.knowledge.evidence_summary import by_gpu, gpu_kinds, run_counts
from kb.model.entry import Entry, Evidence

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any


CODES_WIDTH = 14  # on a terminal; longer lists of codes wrap


def run_list(args: argparse.Namespace) -> int:
    kb = load(args.kb_dir)
    kinds = gpu_kinds(kb.evidence)
    ordered = sorted(kb.entries, key=lambda e: (e.area, e.id))
    rows: list[dict[str, Any]] = []  # the --json output, one object per entry
    cells: list[list[render.VerificationRow]] = []  # per entry, one per GPU kind
    for e in ordered:
        evs = kb.evidence_for(e.id)
        seen = by_gpu(evs)
        rows.append(
            {
                "id": e.id,
                "title": e.title,
                "area": e.area,
                "local": e.local,
                "codes": [f"{c.api}:{c.value}" for c in e.codes],
                "verification": render.verification_status(e, evs),
                "verified_on": evs[0].gpu if evs else None,
                # every GPU kind with records in the knowledge base; null: not yet verified
                "by_gpu": {k: _record_json(seen[k].record) if k in seen else None for k in kinds},
            }
        )
        cells.append(render.verification_rows(e, evs, kinds))
    if args.json:
        json.dump(rows, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return EXIT_OK
    from rich.text import Text

    from kb.render.table import Col, fitted

    con = render.console()
    width = render.terminal_width(con)
    codes = [_compact_codes(e) for e in ordered]
    if width is not None:
        # On a terminal a long list of codes wraps onto more lines (never cut): a few entries
        # own a dozen codes.
        import textwrap

        codes = ["\n".join(textwrap.wrap(c, CODES_WIDTH, break_long_words=False)) for c in codes]
    # One column per GPU kind ("fix-verified 3/3 2026-11-23"), or one saying nothing was
    # verified anywhere yet when there are no records at all.
    heads = kinds or ["verification"]
    plan = _layout(rows, codes, cells, heads, width)
    level, shown = plan
    table_kw = {"box": None, "pad_edge": False, "header_style": "bold", "show_edge": False}
    cols = {
        "id": Col("id"),
        "area": Col("area"),
        "codes": Col("codes"),
        **{f"gpu{i}": Col(h) for i, h in enumerate(heads)},
        "title": Col("title", give="cut", min_width=1),
    }
    table_rows = []
    for r, c, row in zip(rows, codes, cells):
        cellmap: dict[str, str | Text] = {
            "id": Text(r["id"]) + (Text(" (local)", style="magenta") if r["local"] else Text()),
            "area": r["area"],
            "codes": Text(c),  # numbers; on a terminal, wrapped onto lines of CODES_WIDTH
            "title": r["title"],
        }
        for i, v in enumerate(row):
            cellmap[f"gpu{i}"] = Text(v.cell(level), style=render.WORD_COLORS.get(v.word, "red"))
        table_rows.append([cellmap[k] for k in shown])
    t, _, needed = fitted([cols[k] for k in shown], table_rows, width, **table_kw)
    render.print_whole(con, t, needed)
    left = [cols[k].header for k in cols if k not in shown]
    note = f"{len(rows)} entries"
    if left:
        note += (
            f" ({', '.join(left)} left out at this width: a wider terminal or a pipe shows them)"
        )
    con.print(Text(note, style="dim"))
    if kb.problems:
        print(f"kb: {len(kb.problems)} problem(s) in entry files; run `kb lint`", file=sys.stderr)
    return EXIT_OK


def _layout(
    rows: list[dict[str, Any]],
    codes: list[str],
    cells: list[list[render.VerificationRow]],
    heads: list[str],
    width: int | None,
) -> tuple[int, list[str]]:
    """(how short the GPU cells are, the columns shown) for a terminal `width` cells wide; None
    (a pipe): every column, every cell whole. Never cut: the id (what the other commands take)
    and the codes. What gives way, in turn: the GPU cells get shorter, the title is cut, the
    area goes (the list is sorted by it), the GPU columns go, the title goes."""
    from kb.render.table import overhead

    gpus = [f"gpu{i}" for i in range(len(heads))]
    every = ["id", "area", "codes", *gpus, "title"]
    if width is None:
        return 0, every

    def natural(key: str, level: int) -> int:
        if key == "id":
            return max([2] + [len(r["id"]) + (8 if r["local"] else 0) for r in rows])
        if key == "area":
            return max([4] + [len(r["area"]) for r in rows])
        if key == "codes":
            return max([5] + [len(ln) for c in codes for ln in c.split("\n")])
        i = int(key[3:])
        return max([len(heads[i])] + [len(row[i].cell(level)) for row in cells])

    kw = {"box": None, "pad_edge": False}
    candidates = [
        *((level, every, 30) for level in (0, 1, 2)),
        (2, [k for k in every if k != "area"], 24),
        (2, [k for k in every if k != "area"], 12),
        (2, ["id", "codes", "title"], 16),
        (2, ["id", "codes"], 0),
    ]
    for level, keys, title_min in candidates:
        fixed = [natural(k, level) for k in keys if k != "title"]
        if sum(fixed) + title_min + overhead(len(keys), kw) <= width:
            return level, keys
    return 2, ["id", "codes"]


def _record_json(ev: Evidence) -> dict[str, Any]:
    reproduced, runs = run_counts(ev)
    return {
        "gpu": ev.gpu,
        "status": ev.status,
        "fix_status": ev.fix_status,
        "runs": runs,
        "reproduced_runs": reproduced,
        "date": ev.date,
        "torch": ev.torch,
        "driver": ev.driver,
    }


def _compact_codes(entry: Entry) -> str:
    """700 L77: today's runtime number, the legacy one prefixed L, a driver one only if it differs."""
    rt = {c.value for c in entry.codes if c.api == "runtime"}
    parts = [str(v) for v in sorted(rt)]
    parts += [f"L{c.value}" for c in entry.codes if c.api == "runtime-legacy"]
    parts += [f"D{c.value}" for c in entry.codes if c.api == "driver" and c.value not in rt]
    return " ".join(parts)
