"""Run entries' repro and fix_check programs on this machine and save exactly what they print.

For authoring entries on a GPU machine before kb itself is installed there: needs only PyYAML.
`kb verify` is the real check; this only captures raw output so signatures and examples can be
written from what the hardware really says.

    python3 scripts/capture_repros.py OUT.json entries/cuda/a.yaml entries/cuda/b.yaml ...
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import yaml


def run(code: str, env: dict, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "prog.py")
        with open(path, "w") as fh:
            fh.write(code)
        full_env = dict(os.environ, PYTHONUNBUFFERED="1", **{k: str(v) for k, v in env.items()})
        t0 = time.time()
        try:
            p = subprocess.run(
                [sys.executable, path],
                cwd=tmp,
                env=full_env,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                start_new_session=True,
            )
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = "timeout", str(e.stdout or ""), str(e.stderr or "")
        return {
            "rc": rc,
            "seconds": round(time.time() - t0, 2),
            "stdout": out[-20000:],
            "stderr": err[-20000:],
        }


def main() -> int:
    out_path, files = sys.argv[1], sys.argv[2:]
    results = {}
    for f in files:
        data = yaml.safe_load(open(f))
        res = {}
        for part in ("repro", "fix_check"):
            prog = data.get(part)
            if prog:
                res[part] = run(prog["code"], prog.get("env", {}), float(prog.get("timeout", 120)))
                print(
                    f"{data['id']} {part}: rc={res[part]['rc']} {res[part]['seconds']}s", flush=True
                )
        results[data["id"]] = res
    with open(out_path, "w") as fh:
        json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
