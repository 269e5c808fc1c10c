"""`kb code N`: what a CUDA error code means in every numbering era, and which entry owns it."""

from __future__ import annotations

import json
import sys

import kb.knowledge.cuda_codes as cuda_codes
from kb.diagnosis.engine import default_engine

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any

ERA = {
    "runtime": "runtime API (cudaError_t), CUDA >= 10.1",
    "runtime-legacy": "runtime API (cudaError_t), CUDA < 10.1",
    "driver": "driver API (CUresult)",
}


def _headline(raw: str, rows: list[dict[str, Any]]) -> str:
    """What the readings below have in common, or that they differ: only when they truly do
    (700 is an illegal address in the runtime and the driver API alike; 4 is not)."""
    texts = {r["text"].casefold() for r in rows}
    values = {r["value"] for r in rows}
    if len(texts) > 1:
        return f"{raw} means different things depending on the API and CUDA version:"
    if len(values) > 1:  # a name: its number changed with CUDA 10.1's renumbering
        return f"{raw} ({rows[0]['text']}) has a different number depending on the CUDA version:"
    if len(rows) > 1:
        return f"{raw} means the same in every API and CUDA version that has it: {rows[0]['text']}"
    return f"{raw}: {rows[0]['text']}"


def run_code(args) -> int:
    raw = args.code.strip()
    if raw.lstrip("-").isdigit():
        infos = cuda_codes.by_value(int(raw))
    else:
        infos = cuda_codes.by_name_all(raw)
    from kb.render.progress import reading_label, step

    with step(reading_label):
        owners = default_engine(args.kb_dir).owners
    rows: list[dict[str, Any]] = [  # one per reading of the code; the --json output
        {
            "api": i.api,
            "value": i.value,
            "name": i.name,
            "text": i.text,
            "entry": owners.get((i.api, i.value)),
        }
        for i in infos
    ]
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif not rows:
        print(f"kb: {raw} is not a CUDA runtime or driver error code", file=sys.stderr)
    else:
        print(_headline(raw, rows))
        for r in rows:
            print(f"  {r['api']:15} {r['value']:<6} {r['name']:36} {r['text']}")
            print(
                f"  {'':15} {'':6} {ERA[r['api']]}"
                + (f"  ->  kb show {r['entry']}" if r["entry"] else "")
            )
    return 0 if rows else 1
