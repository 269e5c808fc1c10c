"""kb verify, on the CPU: verdicts, isolation, killing, cancelling, requirements, scheduling.

Every repro here is plain Python printing an error text, with requires: {gpu: false}.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
from test_verify_support import (
    FIXTURES,
    NO_GPU,
    WITH_GPU,
    alive,
    gone_within,
    load_fakes,
    wait_for_file,
    write_entry,
)

import kb.verify.sandbox as verify_sandbox
import kb.verify.verifier as verify
from kb.model.entry import Requirements
from kb.model.record import replace
from kb.verify.verifier import (
    CANCELLED,
    ERROR,
    FIX_FAILED,
    FIX_VERIFIED,
    NOT_REPRODUCED,
    REPRODUCED,
    SKIPPED,
    TIMEOUT,
    check_requirements,
    child_env,
    run_program,
    verify_entry,
    verify_many,
    version_matches,
)

# A repro that starts a grandchild (sleeping, optionally deaf to SIGTERM), says where it is, and
# then does whatever MODE says.
SPAWNER = r"""
import os, signal, subprocess, sys, time
deaf = os.environ.get("DEAF") == "1"
body = ("import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if deaf else "") + "import time\ntime.sleep(120)"
p = subprocess.Popen([sys.executable, "-c", body])
if deaf:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(0.2)  # let the grandchild install its handler before anyone is told it exists
with open(os.environ["PIDFILE"] + ".tmp", "w") as fh:
    fh.write(str(p.pid))
os.replace(os.environ["PIDFILE"] + ".tmp", os.environ["PIDFILE"])
print("grandchild started", flush=True)
if os.environ.get("MODE") == "exit":
    print("SpawnerError: boom")
    sys.exit(0)
time.sleep(120)
"""


@pytest.fixture(scope="module")
def fakes_kb(tmp_path_factory):
    return load_fakes()


def by_id(kb, entry_id):
    e = kb.get(entry_id)
    assert e is not None, entry_id
    return e


# ---------------------------------------------------------------- verdicts
def test_reproduced_and_fix_verified(fakes_kb):
    o = verify_entry(by_id(fakes_kb, "fake-illegal-access"), fakes_kb, NO_GPU)
    assert (o.status, o.fix_status) == (REPRODUCED, FIX_VERIFIED)
    assert o.matched == ("torch-modern",)
    assert o.lines == ("RuntimeError: CUDA error: an illegal memory access was encountered",)
    assert o.exit_code == 1 and o.fix_exit_code == 0
    assert "step 1 ok" in o.output and "all good" in o.fix_output
    assert not o.failed and o.duration_s > 0 and o.finished >= o.started > 0


def test_run_fix_false_skips_the_fix(fakes_kb):
    o = verify_entry(by_id(fakes_kb, "fake-illegal-access"), fakes_kb, NO_GPU, run_fix=False)
    assert (o.status, o.fix_status, o.fix_output) == (REPRODUCED, "", "")


def test_not_reproduced_says_what_matched_instead(fakes_kb):
    o = verify_entry(by_id(fakes_kb, "fake-wrong-error"), fakes_kb, NO_GPU)
    assert o.status == NOT_REPRODUCED and o.failed
    assert o.matched_instead == ("fake-illegal-access",)
    assert o.matched == ()
    assert "ranked fake-illegal-access first" in o.detail and "exit code 1" in o.detail
    assert "illegal memory access" in o.output  # the tail of what it printed is kept


def test_not_reproduced_when_an_expected_signature_is_missing(fakes_kb):
    o = verify_entry(by_id(fakes_kb, "fake-two-signatures"), fakes_kb, NO_GPU)
    assert o.status == NOT_REPRODUCED
    assert o.matched == ("jam",)  # the lookup did rank it first; one wording is missing
    assert "jam-hint" in o.detail and "ranked" not in o.detail


def test_fix_failed_on_exit_code(fakes_kb):
    o = verify_entry(by_id(fakes_kb, "fake-fix-exit"), fakes_kb, NO_GPU)
    assert (o.status, o.fix_status) == (REPRODUCED, FIX_FAILED) and o.failed
    assert "fix_check exit code 3" in o.detail and "still matches" not in o.detail
    assert o.fix_detail == "fix_check exit code 3" and o.fix_exit_code == 3


def test_fix_failed_when_still_matching(fakes_kb):
    o = verify_entry(by_id(fakes_kb, "fake-fix-still-matches"), fakes_kb, NO_GPU)
    assert (o.status, o.fix_status) == (REPRODUCED, FIX_FAILED)
    assert "still matches" in o.detail and "flux" in o.detail


def test_error_when_the_interpreter_cannot_start(fakes_kb, tmp_path):
    o = verify_entry(
        by_id(fakes_kb, "fake-illegal-access"),
        fakes_kb,
        NO_GPU,
        python=str(tmp_path / "no-such-python"),
    )
    assert o.status == ERROR and o.failed and "cannot start" in o.detail


def test_skipped_entries_never_run(tmp_path):
    marker = tmp_path / "ran"
    write_entry(
        tmp_path / "e" / "t",
        "needs-gpu-marker",
        f"open({str(marker)!r}, 'w').write('x')\nprint('NeedsGpuMarkerError: boom')",
        requires={"gpu": True},
    )
    kb = load_fakes(tmp_path / "e")
    o = verify_entry(kb.get("needs-gpu-marker"), kb, NO_GPU)
    assert o.status == SKIPPED and o.detail == "no GPU: test: no NVML" and not o.failed
    assert not marker.exists()
    o = verify_entry(kb.get("needs-gpu-marker"), kb, WITH_GPU)  # the same entry, a GPU "present"
    assert o.status == REPRODUCED and marker.exists()


def test_local_entries_need_trust(tmp_path):
    write_entry(tmp_path / "mine" / "t", "my-entry", "print('MyEntryError: boom')")
    kb = load_fakes(FIXTURES, local=[tmp_path / "mine"])
    e = kb.get("my-entry")
    assert e.local
    o = verify_entry(e, kb, NO_GPU)
    assert o.status == SKIPPED and o.detail == "local entry: pass --trust"
    assert verify_entry(e, kb, NO_GPU, trust=True).status == REPRODUCED


# ---------------------------------------------------------------- requirements
def _with(entry, **req):
    return replace(entry, repro=replace(entry.repro, requires=Requirements(**req)))


@pytest.mark.parametrize(
    "req,env,reason",
    [
        ({"gpu": True}, NO_GPU, "no GPU: test: no NVML"),
        ({"gpu": True, "gpus": 2}, WITH_GPU, "needs 2 GPUs, 1 visible"),
        (
            {"gpu": True, "free_memory_gb": 100},
            WITH_GPU,
            "needs 100 GiB free GPU memory, 78.1 GiB free on NVIDIA Test H100",
        ),
        (
            {"gpu": True, "compute_capability": ">=10.0"},
            WITH_GPU,
            "needs compute capability >=10.0, NVIDIA Test H100 is 9.0",
        ),
        (
            {"gpu": False, "torch": ">=2.0"},
            NO_GPU,
            "cannot import torch (ModuleNotFoundError: No module named 'torch')",
        ),
        ({"gpu": False, "torch": "<2.0"}, WITH_GPU, "needs torch <2.0, found 2.11.0+cu130"),
        ({"gpu": False, "torch": "bogus"}, WITH_GPU, "cannot read the torch requirement 'bogus'"),
    ],
)
def test_each_unmet_requirement_is_named(fakes_kb, req, env, reason):
    e = _with(by_id(fakes_kb, "fake-illegal-access"), **req)
    got = check_requirements(e, env)
    assert got is not None and reason in got
    o = verify_entry(e, fakes_kb, env)
    assert o.status == SKIPPED and reason in o.detail and o.output == ""


@pytest.mark.parametrize(
    "req",
    [
        {
            "gpu": True,
            "gpus": 1,
            "free_memory_gb": 70,
            "compute_capability": ">=8.0",
            "torch": ">=2.1,<2.12",
        },
        {"gpu": False},
        {"gpu": False, "torch": "==2.11.*"},
    ],
)
def test_met_requirements(fakes_kb, req):
    assert (
        check_requirements(_with(by_id(fakes_kb, "fake-illegal-access"), **req), WITH_GPU) is None
    )


def test_a_repro_that_imports_torch_needs_torch(fakes_kb):
    e = by_id(fakes_kb, "fake-illegal-access")
    e = replace(e, repro=replace(e.repro, code="import os, torch\nprint(torch.ones(1))\n"))
    reason = check_requirements(e, NO_GPU)
    assert (
        reason is not None
        and reason.startswith("needs torch,")
        and "No module named 'torch'" in reason
    )
    assert check_requirements(e, WITH_GPU) is None
    # a mention of torch that is not an import does not count
    e = replace(e, repro=replace(e.repro, code="print('import torch')\nimport torchvision_free\n"))
    assert check_requirements(e, NO_GPU) is None


@pytest.mark.parametrize(
    "version,spec,ok",
    [
        ("2.11.0+cu130", ">=2.1,<2.12", True),
        ("2.11.0+cu130", "<2.11", False),
        ("2.11.0", "==2.11.*", True),
        ("2.1.2", "==2.11.*", False),
        ("2.4.1", "~=2.4", True),
        ("3.0", "~=2.4", False),
        ("9.0", "9.0", True),
        ("8.6", ">=9.0", False),
        ("2.12.0a0+git", ">=2.12", True),
        ("2.0", "!=2.0.0", False),
        ("x", ">=1", None),
        ("2.0", "about two", None),
    ],
)
def test_version_matches(version, spec, ok):
    assert version_matches(version, spec) is ok


# ---------------------------------------------------------------- the child process
def test_child_env_is_explicit(monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("TORCH_SHOW_CPP_STACKTRACES", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    env = child_env({"CUDA_LAUNCH_BLOCKING": "1"})
    assert "SECRET_TOKEN" not in env
    assert env["NCCL_DEBUG"] == "INFO" and env["TORCH_SHOW_CPP_STACKTRACES"] == "1"
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["CUDA_LAUNCH_BLOCKING"] == "1"
    assert env["PYTHONUNBUFFERED"] == "1" and "PATH" in env


def test_program_sees_only_its_environment_and_its_own_folder(monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    code = (
        "import os, json; print(json.dumps({'cwd': os.getcwd(), 'files': sorted(os.listdir('.')),"
        " 'secret': os.environ.get('SECRET_TOKEN'), 'mine': os.environ.get('MINE'),"
        " 'pgid_is_self': os.getpgid(0) == os.getpid()}))"
    )
    res = run_program(code, {"MINE": "yes"}, 30, sys.executable)
    import json

    data = json.loads(res.output.strip().splitlines()[-1])
    assert res.rc == 0 and data["secret"] is None and data["mine"] == "yes"
    assert data["files"] == ["repro.py"] and data["cwd"] != os.getcwd()
    assert data["pgid_is_self"]  # its own process group
    assert not os.path.exists(data["cwd"])  # the temp folder is removed afterwards


def test_output_is_streamed_and_capped():
    seen = []
    code = (
        "import sys\nprint('FIRST LINE')\nfor i in range(20000):\n    print('x' * 60, i)\n"
        "print('LAST LINE', file=sys.stderr)\n"
    )
    res = run_program(code, {}, 60, sys.executable, on_line=seen.append)
    assert res.rc == 0 and len(seen) == 20002
    assert seen[0] == "FIRST LINE" and seen[-1] == "LAST LINE"
    assert res.cut > 0 and len(res.output) <= verify.MAX_OUTPUT + 200
    assert res.output.startswith("FIRST LINE") and res.output.endswith("LAST LINE")
    assert "kb verify cut" in res.output


def test_timeout_kills_the_whole_group(tmp_path):
    pidfile = tmp_path / "pid"
    t0 = time.monotonic()
    res = run_program(SPAWNER, {"PIDFILE": str(pidfile)}, 1.5, sys.executable)
    took = time.monotonic() - t0
    assert res.timed_out and not res.cancelled and took < 1.5 + verify.KILL_GRACE + 2
    assert "grandchild started" in res.output
    assert gone_within(int(pidfile.read_text())), "the grandchild outlived its repro"


def test_sigterm_deaf_group_gets_sigkill(tmp_path, monkeypatch):
    monkeypatch.setattr(verify_sandbox, "KILL_GRACE", 0.5)
    pidfile = tmp_path / "pid"
    t0 = time.monotonic()
    res = run_program(SPAWNER, {"PIDFILE": str(pidfile), "DEAF": "1"}, 1.0, sys.executable)
    assert res.timed_out and res.rc == -9  # the leader ignored SIGTERM: SIGKILL after the grace
    assert 1.0 + 0.5 <= time.monotonic() - t0 < 6
    assert gone_within(int(pidfile.read_text()))


def test_clean_exit_leaves_nothing_running(tmp_path):
    pidfile = tmp_path / "pid"
    res = run_program(SPAWNER, {"PIDFILE": str(pidfile), "MODE": "exit"}, 30, sys.executable)
    assert res.rc == 0 and not res.timed_out and "SpawnerError: boom" in res.output
    assert res.duration < 10  # did not wait for the grandchild's sleep or its open pipe
    assert gone_within(int(pidfile.read_text()))


def test_timeout_verdict(tmp_path):
    pidfile = tmp_path / "pid"
    write_entry(tmp_path / "e" / "t", "slow-one", SPAWNER, timeout=1.0, env={"PIDFILE": pidfile})
    kb = load_fakes(tmp_path / "e")
    o = verify_entry(kb.get("slow-one"), kb, NO_GPU)
    assert o.status == TIMEOUT and o.failed and "process group killed" in o.detail
    assert "grandchild started" in o.output
    assert gone_within(int(pidfile.read_text()))
    # --timeout overrides the entry's own
    o = verify_entry(kb.get("slow-one"), kb, NO_GPU, timeout=0.3)
    assert o.status == TIMEOUT and "0.3s" in o.detail


def test_cancel_stops_a_running_program(tmp_path):
    pidfile = tmp_path / "pid"
    cancel = threading.Event()
    box = {}
    t = threading.Thread(
        target=lambda: box.update(
            r=run_program(SPAWNER, {"PIDFILE": str(pidfile)}, 60, sys.executable, cancel=cancel)
        )
    )
    t0 = time.monotonic()
    t.start()
    pid = int(wait_for_file(pidfile))
    assert alive(pid)
    cancel.set()
    t.join(10)
    assert not t.is_alive() and box["r"].cancelled and not box["r"].timed_out
    assert time.monotonic() - t0 < 10
    assert gone_within(pid)


@pytest.mark.parametrize("repeat", [False, True])
def test_keyboard_interrupt_kills_the_group(tmp_path, monkeypatch, repeat):
    """Ctrl-C arrives as KeyboardInterrupt in the waiting thread: the group dies before it
    propagates, also when Ctrl-C keeps coming during the SIGTERM grace period."""
    pidfile = tmp_path / "pid"
    real_sleep = time.sleep
    fired = []

    def sleepy(s):
        if pidfile.exists() and pidfile.read_text() and (repeat or not fired):
            fired.append(1)
            raise KeyboardInterrupt
        real_sleep(s)

    monkeypatch.setattr(verify.time, "sleep", sleepy)  # run_program's waits, and only those here
    env = {"PIDFILE": str(pidfile), "DEAF": "1" if repeat else "0"}
    with pytest.raises(KeyboardInterrupt):
        run_program(SPAWNER, env, 60, sys.executable)
    monkeypatch.undo()
    assert len(fired) == (2 if repeat else 1)
    assert gone_within(int(pidfile.read_text()))


# ---------------------------------------------------------------- many entries
def test_verify_many_keeps_order_and_reports_each(fakes_kb):
    entries = sorted(fakes_kb.entries, key=lambda e: e.id)
    done = []
    outs = verify_many(entries, fakes_kb, NO_GPU, jobs=3, on_done=done.append)
    assert [o.entry_id for o in outs] == [e.id for e in entries]
    assert sorted(o.entry_id for o in done) == sorted(e.id for e in entries)
    got = {o.entry_id: (o.status, o.fix_status) for o in outs}
    assert got == {
        "fake-fix-exit": (REPRODUCED, FIX_FAILED),
        "fake-fix-still-matches": (REPRODUCED, FIX_FAILED),
        "fake-illegal-access": (REPRODUCED, FIX_VERIFIED),
        "fake-needs-gpu": (SKIPPED, ""),
        "fake-two-signatures": (NOT_REPRODUCED, ""),
        "fake-wrong-error": (NOT_REPRODUCED, ""),
    }


STAMP = r"""
import os, time
t0 = time.time()
time.sleep(0.8)
t1 = time.time()
with open(os.path.join(os.environ["STAMPS"], os.environ["NAME"]), "w") as fh:
    fh.write(f"{t0} {t1}")
print("StampError: boom " + os.environ["NAME"])
"""


def test_exclusive_entries_never_overlap(tmp_path):
    stamps = tmp_path / "stamps"
    stamps.mkdir()
    names = ["p1", "x1", "p2", "p3", "x2"]
    for n in names:
        req = {"gpu": False, "exclusive": n.startswith("x")}
        write_entry(
            tmp_path / "e" / "t",
            f"stamp-{n}",
            STAMP,
            pattern=f"StampError: boom {n}$",
            requires=req,
            env={"STAMPS": stamps, "NAME": n},
        )
    kb = load_fakes(tmp_path / "e")
    started = []
    outs = verify_many(
        [kb.get(f"stamp-{n}") for n in names],
        kb,
        NO_GPU,
        jobs=3,
        on_start=lambda e: started.append(e.id),
    )
    assert [o.status for o in outs] == [REPRODUCED] * 5, [o.detail for o in outs]
    span = {n: tuple(map(float, (stamps / n).read_text().split())) for n in names}

    def overlap(a, b):
        return max(span[a][0], span[b][0]) < min(span[a][1], span[b][1])

    for x in ("x1", "x2"):
        for other in names:
            if other != x:
                assert not overlap(x, other), f"{x} ran beside {other}: {span}"
    # and the others did run in parallel, so the check above could have failed
    assert overlap("p1", "p2") and overlap("p2", "p3") and overlap("p1", "p3")
    assert len(started) == 5


def test_cancel_in_verify_many(tmp_path):
    pidfile = tmp_path / "pid"
    write_entry(tmp_path / "e" / "t", "hang-a", SPAWNER, env={"PIDFILE": pidfile})
    write_entry(tmp_path / "e" / "t", "hang-b", "print('HangBError: boom')")
    kb = load_fakes(tmp_path / "e")
    cancel = threading.Event()
    threading.Thread(target=lambda: (wait_for_file(pidfile), cancel.set()), daemon=True).start()
    t0 = time.monotonic()
    outs = verify_many([kb.get("hang-a"), kb.get("hang-b")], kb, NO_GPU, jobs=1, cancel=cancel)
    assert time.monotonic() - t0 < 15
    assert [o.status for o in outs] == [CANCELLED, CANCELLED]
    assert outs[1].detail == "cancelled before it started"
    assert gone_within(int(pidfile.read_text()))


def test_an_exception_in_one_entry_is_an_error_outcome(fakes_kb, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("lookup broke")

    monkeypatch.setattr(verify, "judge", boom)
    outs = verify_many([by_id(fakes_kb, "fake-illegal-access")], fakes_kb, NO_GPU)
    assert outs[0].status == ERROR and "lookup broke" in outs[0].detail


# ---------------------------------------------------------------- environment probe
def test_probe_environment_without_torch_or_nvml(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    fake_py = tmp_path / "python"
    fake_py.write_text(
        "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n"
    )
    fake_py.chmod(0o755)
    env = verify.probe_environment(str(fake_py))
    assert env.gpu is None and "nvidia-ml-py" in env.gpu_reason
    assert env.torch == "" and "No module named 'torch'" in env.torch_error


def test_probe_torch_reads_the_child(tmp_path):
    fake_py = tmp_path / "python"
    fake_py.write_text('#!/bin/sh\necho \'{"torch": "2.11.0+cu130", "cuda": "13.0"}\'\n')
    fake_py.chmod(0o755)
    assert verify.probe_torch(str(fake_py)) == ("2.11.0+cu130", "13.0", "")


def test_kb_verify_imports_neither_torch_nor_pynvml():
    code = (
        "import sys, kb.verify.verifier, kb.cli.verify, kb.verify.gpu; "
        "print(sorted(m for m in ('torch', 'pynvml') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_runs_that_disagree_are_flaky_with_counts_and_exit_codes():
    from kb.verify.verifier import FLAKY, Outcome, combine_runs

    ok = Outcome("e", verify.REPRODUCED, verify.FIX_VERIFIED, exit_code=1, fix_exit_code=0)
    crash = Outcome(
        "e", verify.NOT_REPRODUCED, "", exit_code=-11, detail="the lookup matched no entry"
    )
    o = combine_runs([ok, crash, ok])
    assert o.status == FLAKY and o.failed
    assert "reproduced 2/3" in o.detail and "not-reproduced 1/3" in o.detail and "-11" in o.detail
    same = combine_runs([ok, ok, ok])
    assert same.status == verify.REPRODUCED and "all 3 runs agree" in same.detail


def test_a_cancelled_run_is_no_verdict_and_is_not_counted():
    """--repeat 3 stopped during the second run (Ctrl-C, a time limit on the whole command): the
    run that finished is the verdict, with runs=1, never "flaky" from a run that was cut short."""
    from kb.verify.verifier import CANCELLED, Outcome, combine_runs

    ok = Outcome("e", verify.REPRODUCED, verify.FIX_VERIFIED, exit_code=1, fix_exit_code=0)
    cut = Outcome("e", CANCELLED, "", detail="cancelled; process group killed")
    o = combine_runs([ok, cut])
    assert o.status == verify.REPRODUCED and o.fix_status == verify.FIX_VERIFIED
    assert (o.runs, o.reproduced_runs) == (1, 1) and not o.failed
    assert "1 of 2 runs cancelled, not counted" in o.detail
    fix_cut = Outcome("e", verify.REPRODUCED, CANCELLED, exit_code=1)
    o = combine_runs([ok, ok, fix_cut])
    assert (o.status, o.runs, o.reproduced_runs) == (verify.REPRODUCED, 2, 2)
    assert combine_runs([cut, cut]).status == CANCELLED
