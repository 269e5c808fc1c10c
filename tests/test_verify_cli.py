"""`kb verify` through kb.cli.main: selection, exit codes, --json, --record, --trust, --timeout."""

from __future__ import annotations

import json

import pytest
import yaml
from test_verify_support import FIXTURES, H100, kb_home, write_entry  # noqa: F401

import kb.paths
import kb.verify.gpu
import kb.verify.verifier
from kb.cli.main import main
from kb.knowledge.evidence import load_evidence

pytestmark = pytest.mark.warm_home  # runs kb as a user would after its first run; tests no cache

ALL_FAKES = [
    "fake-fix-exit",
    "fake-fix-still-matches",
    "fake-illegal-access",
    "fake-needs-gpu",
    "fake-two-signatures",
    "fake-wrong-error",
]


@pytest.fixture(autouse=True)
def fake_world(monkeypatch, tmp_path):
    """The fixtures are the bundled knowledge base; no GPU, no torch, no evidence yet."""
    monkeypatch.setattr(kb.paths, "bundled_entries_folder", lambda: str(FIXTURES))
    monkeypatch.setattr(kb.paths, "evidence_folder", lambda: str(tmp_path / "no-evidence"))
    monkeypatch.setattr(kb.verify.gpu, "inspect", lambda: (None, "test: no NVML"))
    monkeypatch.setattr(
        kb.verify.verifier, "probe_torch", lambda python, timeout=120.0: ("", "", "no torch here")
    )
    monkeypatch.delenv("KB_PATH", raising=False)


def run(capsys, *argv):
    code = main(["verify", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_one_good_entry_exits_0(capsys):
    code, out, err = run(capsys, "fake-illegal-access", "--json")
    assert code == 0, err
    [o] = json.loads(out)
    assert (o["entry_id"], o["status"], o["fix_status"]) == (
        "fake-illegal-access",
        "reproduced",
        "fix-verified",
    )
    assert o["matched"] == ["torch-modern"]
    assert "no GPU (test: no NVML)" in err  # the environment is named on stderr


def test_summary_table(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # no wrapping inside the words checked below
    code, out, err = run(capsys, "fake-illegal-access", "fake-wrong-error", "fake-needs-gpu")
    assert code == 1
    assert "fake-wrong-error" in out and "not-reproduced" in out and "fix-verified" in out
    assert "torch-modern" in out and "last line: RuntimeError: CUDA error" in out
    assert "1 reproduced (1 fix verified), 1 not-reproduced, 1 skipped" in out
    assert "[1/3]" in err  # one line per entry when stderr is not a terminal


@pytest.mark.parametrize(
    "entry", ["fake-fix-exit", "fake-fix-still-matches", "fake-two-signatures", "fake-wrong-error"]
)
def test_failures_exit_1(capsys, entry):
    code, out, _ = run(capsys, entry, "--json")
    assert code == 1 and json.loads(out)[0]["entry_id"] == entry


def test_skipped_is_not_a_failure_but_nothing_verified(capsys):
    code, out, _ = run(capsys, "fake-needs-gpu", "--json")
    [o] = json.loads(out)
    # 3, not 1: nothing failed, nothing could be verified here (a CI gate can tell them apart).
    assert code == 3 and o["status"] == "skipped" and o["detail"] == "no GPU: test: no NVML"


def test_all_entries_with_a_repro_by_default(capsys):
    code, out, _ = run(capsys, "--json", "-j", "4")
    assert code == 1
    assert sorted(o["entry_id"] for o in json.loads(out)) == ALL_FAKES


def test_area_and_tag_filters(capsys):
    code, out, _ = run(capsys, "--tag", "widget", "--json")
    assert code == 1 and [o["entry_id"] for o in json.loads(out)] == ["fake-wrong-error"]
    code, out, _ = run(capsys, "--tag", "memory", "--tag", "flux", "--json")
    assert sorted(o["entry_id"] for o in json.loads(out)) == [
        "fake-fix-still-matches",
        "fake-illegal-access",
    ]
    code, out, err = run(capsys, "--area", "nowhere")
    assert code == 2 and "no entries with a repro matching --area nowhere" in err


def test_usage_errors_exit_2(capsys, tmp_path):
    code, _, err = run(capsys, "fake-ilegal-access")
    assert code == 1 and "did you mean fake-illegal-access" in err  # unknown id: 1, as in kb show
    code, _, err = run(capsys, "--python", str(tmp_path / "nope"), "fake-illegal-access")
    assert code == 2 and "no Python interpreter" in err
    code, _, err = run(capsys, "-j", "0")
    assert code == 2


def test_timeout_flag_overrides_the_entry(capsys, tmp_path):
    write_entry(tmp_path / "mine" / "t", "sleeper", "import time\ntime.sleep(30)")
    code, out, _ = run(
        capsys,
        "--kb-dir",
        str(tmp_path / "mine"),
        "--trust",
        "--timeout",
        "0.5",
        "sleeper",
        "--json",
    )
    [o] = json.loads(out)
    assert code == 1 and o["status"] == "timeout" and o["duration_s"] < 10


def test_local_entries_need_trust(capsys, tmp_path):
    marker = tmp_path / "ran"
    write_entry(
        tmp_path / "mine" / "t",
        "mine-one",
        f"open({str(marker)!r}, 'w').write('x')\nprint('MineOneError: boom')",
    )
    code, out, _ = run(capsys, "--kb-dir", str(tmp_path / "mine"), "mine-one", "--json")
    [o] = json.loads(out)
    assert code == 3 and o["status"] == "skipped" and o["detail"] == "local entry: pass --trust"
    assert not marker.exists()
    code, out, _ = run(capsys, "--kb-dir", str(tmp_path / "mine"), "mine-one", "--trust", "--json")
    assert code == 0 and json.loads(out)[0]["status"] == "reproduced" and marker.exists()


def test_record_writes_one_file_per_entry_that_ran(capsys, tmp_path):
    root = tmp_path / "evidence"
    code, _, err = run(
        capsys,
        "--record",
        "--evidence-dir",
        str(root),
        "fake-illegal-access",
        "fake-wrong-error",
        "fake-needs-gpu",
    )
    assert code == 1
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert files == [
        "fake-illegal-access/no-gpu--torch-none.yaml",
        "fake-wrong-error/no-gpu--torch-none.yaml",
    ]
    evs = load_evidence(root)
    ok = evs["fake-illegal-access"][0]
    assert (ok.status, ok.fix_status, ok.gpu, ok.torch) == (
        "reproduced",
        "fix-verified",
        "no GPU",
        "none",
    )
    assert ok.matched == ("RuntimeError: CUDA error: an illegal memory access was encountered",)
    assert len(ok.date) == 10 and ok.date[4] == "-" and ok.duration_s > 0
    assert evs["fake-wrong-error"][0].status == "not-reproduced"
    assert "recorded 2 evidence file(s)" in err


def test_record_on_a_gpu_names_the_environment_and_rewrites_in_place(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(kb.verify.gpu, "inspect", lambda: (H100, ""))
    monkeypatch.setattr(
        kb.verify.verifier,
        "probe_torch",
        lambda python, timeout=120.0: ("2.11.0+cu130", "13.0", ""),
    )
    root = tmp_path / "evidence"
    for _ in range(2):  # the same GPU and torch: the same file, replaced, no leftovers
        code, _, _ = run(capsys, "--record", "--evidence-dir", str(root), "fake-needs-gpu")
        assert code == 0
    files = [p for p in root.rglob("*") if p.is_file()]
    assert [p.name for p in files] == ["nvidia-test-h100--torch-2.11.0-cu130.yaml"]
    data = yaml.safe_load(files[0].read_text())
    assert data["gpu"] == "NVIDIA Test H100" and data["gpu_memory_mib"] == 81559
    assert (
        data["driver"] == "580.159.04"
        and data["cuda"] == "13.0"
        and data["torch"] == "2.11.0+cu130"
    )
    assert data["status"] == "reproduced" and data["fix_status"] == ""


def test_record_from_an_installed_kb_writes_under_the_current_folder(capsys, monkeypatch, tmp_path):
    """After `pip install .` there is no checkout of kb's own: `kb verify --record` (as the
    README shows it) records into ./evidence, and says where, instead of exiting 2."""
    monkeypatch.setattr(kb.paths, "repo_evidence_dir", lambda: None)
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "--record", "fake-illegal-access")
    assert code == 0 and (tmp_path / "evidence" / "fake-illegal-access").is_dir()
    assert f"records go to {tmp_path / 'evidence'}" in err


def test_record_defaults_to_the_repo_evidence_dir(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(kb.paths, "repo_evidence_dir", lambda: tmp_path / "repo-evidence")
    code, _, _ = run(capsys, "--record", "fake-illegal-access")
    assert code == 0 and (tmp_path / "repo-evidence" / "fake-illegal-access").is_dir()


def test_an_interrupt_kills_and_exits_130(capsys, tmp_path, monkeypatch):
    """SIGINT/SIGTERM during a run cancel it: what finished is reported, the rest is cancelled."""
    import os
    import signal
    import threading

    pidfile = tmp_path / "pid"
    code = (
        "import os, time\nopen(os.environ['PIDFILE'], 'w').write(str(os.getpid()))\n"
        "time.sleep(60)\n"
    )
    write_entry(tmp_path / "mine" / "t", "hangs", code, env={"PIDFILE": pidfile})

    def interrupt_when_running():
        for _ in range(400):
            if pidfile.exists() and pidfile.read_text():
                os.kill(os.getpid(), signal.SIGINT)
                return
            threading.Event().wait(0.025)

    threading.Thread(target=interrupt_when_running, daemon=True).start()
    rc, out, err = run(
        capsys,
        "--kb-dir",
        str(tmp_path / "mine"),
        "--trust",
        "hangs",
        "fake-illegal-access",
        "--json",
    )
    assert rc == 130 and "stopping" in err
    statuses = {o["entry_id"]: o["status"] for o in json.loads(out)}
    assert statuses["hangs"] == "cancelled"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored


def test_a_skip_reason_is_said_once_with_its_entries(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    ids = [f"gpu-only-{i}" for i in range(12)]
    for i in ids:
        write_entry(tmp_path / "mine" / "t", i, "print('x')", requires={"gpu": True})
    code, out, err = run(capsys, "--kb-dir", str(tmp_path / "mine"), "--trust", *ids)
    assert code == 3
    reason = "no GPU: test: no NVML"
    assert out.count(reason) == 1 and "skipped 12 entries: " + reason in out
    listed = out.split(reason, 1)[1]
    assert all(listed.count(i + ",") + listed.count(i + "\n") == 1 for i in ids), listed
    assert "entry" not in out.split("skipped 12", 1)[0]  # no table of skipped rows before it
    assert "test: no NVML" not in err.split("\n", 1)[1]  # progress lines do not repeat it


def test_default_parallelism_is_half_the_cores_capped_at_8():
    from kb.cli.verify import default_jobs

    assert default_jobs(16) == 8
    assert default_jobs(64) == 8
    assert default_jobs(6) == 3
    assert default_jobs(1) == 1
