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
    from rich.markup import escape
    from rich.table import Table

    con = render.console()
    codes = [_compact_codes(e) for e in ordered]
    # One column per GPU kind ("fix-verified 3/3 2026-11-23"), or one saying nothing was
    # verified anywhere yet when there are no records at all.
    heads = kinds or ["verification"]
    fixed = [
        max([len(r["id"]) + (8 if r["local"] else 0) for r in rows] + [2]),
        max([len(r["area"]) for r in rows] + [4]),
        min(max([len(c) for c in codes] + [5]), 14),
    ]

    def kind_widths(texts: list[list[str]]) -> list[int]:
        return [max([len(h)] + [len(t[i]) for t in texts]) for i, h in enumerate(heads)]

    def used(ws: list[int]) -> int:
        return sum(ws) + 2 * len(ws)  # two spaces between columns, the title's included

    # The GPU kinds' cells get shorter until a title of 12 fits; then the title goes, then the
    # area is cut. Never the id: it is what the other commands take.
    for level in (0, 1, 2):
        texts = [[c.cell(level) for c in row] for row in cells]
        widths = fixed + kind_widths(texts)
        if used(widths) + 12 <= con.width:
            break
    title_w = con.width - used(widths)
    if title_w < 0:
        widths[1] = max(widths[1] + title_w, 3)
    t = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    for name, w in zip(("id", "area", "codes", *heads), widths):
        t.add_column(escape(name), no_wrap=True, width=w, overflow="ellipsis")
    show_title = title_w >= 8
    if show_title:
        t.add_column("title", no_wrap=True, width=title_w, overflow="ellipsis")
    for r, c, row, text in zip(rows, codes, cells, texts):
        t.add_row(
            escape(r["id"]) + (" [magenta](local)[/magenta]" if r["local"] else ""),
            escape(r["area"]),
            escape(c),
            *(
                f"[{render.WORD_COLORS.get(v.word, 'red')}]{escape(s)}[/]"
                for v, s in zip(row, text)
            ),
            *([escape(r["title"])] if show_title else []),
        )
    con.print(t)
    con.print(f"[dim]{len(rows)} entries[/dim]")
    if kb.problems:
        print(f"kb: {len(kb.problems)} problem(s) in entry files; run `kb lint`", file=sys.stderr)
    return EXIT_OK


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
