"""The parts kb.verify is made of: each importable on its own, the scheduler without repros, and
kb.verify still offering every name it offered before the split."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import kb.verify.verifier as verify
from kb.verify.schedule import run_scheduled

# Each part and the kb modules it may load: none of them needs the engine, the entries or the
# other parts beyond these.
PARTS = {
    "kb.verify.outcome": set(),
    "kb.verify.sandbox": set(),
    "kb.verify.requirements": set(),
    "kb.verify.probe": {"kb.verify.sandbox", "kb.verify.gpu"},
    "kb.verify.judge": {"kb.verify.outcome"},
    "kb.verify.schedule": set(),
}


@pytest.mark.parametrize("part", sorted(PARTS))
def test_each_part_loads_only_what_it_needs(part):
    code = f"import sys, {part}; print(' '.join(m for m in sys.modules if m.startswith('kb.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # kb.record is what every record is made of (as dataclasses would be): not a part's choice.
    # Package __init__ modules hold only a docstring.
    loaded = set(out.stdout.split()) - {
        part,
        "kb.model.record",
        "kb.model",
        "kb.verify",
        "kb.version",
    }
    assert loaded <= PARTS[part], loaded - PARTS[part]


def test_kb_verify_re_exports_the_parts_public_names():
    import kb.verify.judge
    import kb.verify.outcome
    import kb.verify.probe
    import kb.verify.requirements
    import kb.verify.sandbox

    homes = [
        kb.verify.outcome,
        kb.verify.sandbox,
        kb.verify.probe,
        kb.verify.requirements,
        kb.verify.judge,
    ]
    for name in verify.__all__:
        obj = getattr(verify, name)
        owners = [m for m in homes if getattr(m, name, None) is obj]
        assert owners or getattr(obj, "__module__", "") == "kb.verify.verifier", name
    # the names the CLI, the TUI and kb/__init__.py import from kb.verify
    used = ["Environment", "Outcome", "probe_environment", "probe_torch", "verify_entry"]
    used += ["verify_many", "combine_runs", "evidence_for", "check_requirements", "run_program"]
    used += ["child_env", "RECORDED", "FLAKY", "KILL_GRACE", "MAX_OUTPUT", "judge"]
    for name in used:
        assert name in verify.__all__ and hasattr(verify, name), name


def test_shared_tasks_overlap_and_exclusive_ones_run_alone():
    spans: dict[int, tuple[float, float]] = {}
    finished: list[int] = []

    def task(i: int) -> int:
        t0 = time.monotonic()
        time.sleep(0.3)
        spans[i] = (t0, time.monotonic())
        return i * 10

    def finish(i: int, r: int) -> None:
        assert threading.current_thread() is threading.main_thread()
        assert r == i * 10
        finished.append(i)

    run_scheduled([0, 1, 2], [3, 4], task, finish, jobs=3, cancel=threading.Event())
    assert sorted(finished) == [0, 1, 2, 3, 4] and finished[-2:] == [3, 4]

    def overlap(a: int, b: int) -> bool:
        return max(spans[a][0], spans[b][0]) < min(spans[a][1], spans[b][1])

    assert overlap(0, 1) and overlap(1, 2)
    for x in (3, 4):
        assert not any(overlap(x, o) for o in range(5) if o != x), spans


def test_an_interrupt_sets_cancel_and_waits_for_running_tasks():
    """Ctrl-C in the collecting thread (here: raised by finish for the first result) must tell
    the running tasks to stop and collect them before it propagates."""
    cancel = threading.Event()
    ended: list[int] = []

    def task(i: int) -> int:
        if i == 1:
            cancel.wait(10)  # a real task kills its process group when cancel is set
        return i

    def finish(i: int, r: int) -> None:
        ended.append(i)
        if len(ended) == 1:
            raise KeyboardInterrupt

    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_scheduled([0, 1], [2], task, finish, jobs=2, cancel=cancel)
    assert cancel.is_set() and ended == [0, 1]  # the exclusive task never started
    assert time.monotonic() - t0 < 5  # task 1 returned on cancel, not on its own timeout


def test_a_repro_needing_a_package_the_interpreter_lacks_is_skipped_with_the_reason():
    # pip is installed in the test interpreter; a made-up distribution is not.
    assert verify.missing_packages(("pip",), sys.executable) is None
    assert verify.missing_packages(("pip>=1",), sys.executable) is None
    too_new = verify.missing_packages(("pip>=999",), sys.executable)
    assert too_new is not None and too_new.startswith("needs pip>=999, found pip ")
    absent = verify.missing_packages(("kb-no-such-distribution>=1.0",), sys.executable)
    assert (
        absent
        == f"needs kb-no-such-distribution>=1.0, {sys.executable} does not have kb-no-such-distribution"
    )


def test_requires_packages_is_read_from_the_entry(tmp_path):
    from kb.knowledge.base import load

    src = (Path(__file__).parent / "fixtures" / "good_entry.yaml").read_text()
    text = src.replace(
        "  requires: {gpu: false}",
        "  requires: {gpu: false, packages: ['kb-no-such-distribution']}",
        1,
    )
    assert text != src
    folder = tmp_path / "mine" / "python"
    folder.mkdir(parents=True)
    (folder / "good-entry.yaml").write_text(text)
    kb = load([str(tmp_path / "mine")], bundled=[tmp_path / "none"], use_cache=False)
    entry = next(e for e in kb.entries if e.id == "good-entry")
    assert entry.repro.requires.packages == ("kb-no-such-distribution",)
    env = verify.Environment(python=sys.executable)
    out = verify.verify_entry(entry, kb, env, trust=True)
    assert out.status == "skipped"
    assert (
        out.detail
        == f"needs kb-no-such-distribution, {sys.executable} does not have kb-no-such-distribution"
    )
