"""kb's core never imports torch or textual: lookup starts fast and installs without them."""

import json
import subprocess
import sys

from _repo import REPO

PROBE = r"""
import sys, json
import kb
kb.lookup("RuntimeError: CUDA error: an illegal memory access was encountered")
from kb.cli.main import main
try:
    main(["lookup", "CUDA error: an illegal memory access was encountered"])
except SystemExit:
    pass
heavy = [m for m in ("torch", "textual", "jsonschema", "rich", "kb.job.analyze", "kb.render.job", "kb.job.parsers.flight_recorder")
         if m in sys.modules]
print(json.dumps(heavy), file=sys.stderr)
"""


def test_lookup_imports_neither_torch_nor_textual():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stderr.strip().splitlines()[-1])
    assert "torch" not in loaded
    assert "textual" not in loaded
    # Once the entry cache is warm (the first lookup above built it), neither the schema
    # validator nor rich is needed for a lookup's text output, nor the job view for one message.
    out2 = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=REPO)
    assert json.loads(out2.stderr.strip().splitlines()[-1]) == []


def test_import_kb_is_light():
    code = "import sys, kb; print(sorted(m for m in sys.modules if m.split('.')[0] in ('yaml','whoosh','rich','torch','textual','jsonschema')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.stdout.strip() == "[]", out.stdout
