"""Helpers shared by the kb verify tests (no tests here): fake entries, environments, pids."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from kb.knowledge.base import load
from kb.verify.gpu import GpuDevice, GpuInfo
from kb.verify.verifier import Environment

FIXTURES = Path(__file__).parent / "fixtures" / "verify" / "fake"
NO_GPU = Environment(
    gpu=None,
    gpu_reason="test: no NVML",
    torch="",
    cuda="",
    torch_error="ModuleNotFoundError: No module named 'torch'",
)
H100 = GpuInfo(
    "NVIDIA Test H100",
    81559,
    80000,
    "580.159.04",
    1,
    "9.0",
    (GpuDevice(0, "NVIDIA Test H100", 81559, 80000, "9.0", "GPU-1234"),),
)
WITH_GPU = Environment(gpu=H100, torch="2.11.0+cu130", cuda="13.0")


@pytest.fixture(autouse=True)
def kb_home(tmp_path, monkeypatch):
    """All kb state (entry cache, full-text index) in this test's own folder."""
    monkeypatch.setenv("KB_HOME", str(tmp_path / "kbhome"))
    return tmp_path / "kbhome"


def load_fakes(*dirs: Path, local: list[Path] | None = None):
    return load([str(d) for d in (local or [])], bundled=list(dirs) or [FIXTURES], use_cache=False)


def write_entry(
    folder: Path,
    entry_id: str,
    code: str,
    *,
    pattern: str | None = None,
    fix: str | None = None,
    requires: dict | None = None,
    timeout: float = 30,
    env: dict | None = None,
    tags=("dyn",),
    expect=("main",),
) -> Path:
    """A minimal valid entry whose one signature ('main') is `pattern` (default: '<ID>Error: boom')."""
    word = "".join(p.capitalize() for p in entry_id.split("-"))
    pattern = pattern or f"{word}Error: boom"
    data = {
        "id": entry_id,
        "title": f"Dynamic test entry {entry_id}",
        "summary": "Written by a test.",
        "tags": list(tags),
        "signatures": [{"id": "main", "pattern": pattern}],
        "causes": [{"title": "test", "detail": "test"}],
        "diagnostics": [],
        "fixes": [{"title": "none"}],
        "repro": {
            "requires": requires if requires is not None else {"gpu": False},
            "timeout": timeout,
            "expect": list(expect),
            "code": code,
        },
        "examples": {
            "match": [pattern] * 3,
            "no_match": [
                {"text": "nothing here", "belongs": "none"},
                {"text": "still nothing", "belongs": "none"},
            ],
        },
        "references": [],
    }
    if env:
        data["repro"]["env"] = {k: str(v) for k, v in env.items()}
    if fix is not None:
        data["fix_check"] = {"code": fix, "timeout": timeout}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{entry_id}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def alive(pid: int) -> bool:
    """Running (not a zombie waiting to be reaped by whoever inherited it)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:  # pragma: no cover - no /proc
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False


def gone_within(pid: int, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def wait_for_file(path: Path, seconds: float = 10.0) -> str:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")
