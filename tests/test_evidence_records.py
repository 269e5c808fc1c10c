"""The evidence records still prove their entries: a lookup of the output a record keeps (what the
repro printed on that GPU) names the record's entry first, with the signatures its repro expects,
as `kb verify` required when it wrote the record. A signature or ranking change that would no
longer recognise a wording seen on real hardware fails here, without a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from _repo import REPO

import kb
from kb.knowledge.evidence import load_evidence, write_evidence
from kb.knowledge.evidence_output import GAP, output_excerpt
from kb.model.entry import Evidence
from kb.model.record import replace

pytestmark = pytest.mark.warm_home  # runs kb as a user would after its first run; tests no cache

EVIDENCE = REPO / "evidence"
FILES = sorted(EVIDENCE.glob("*/*.yaml"))


def _with_output() -> list[tuple[Path, dict]]:
    out = []
    for f in FILES:
        data = yaml.safe_load(f.read_text(encoding="utf-8"))
        if data.get("output") and data.get("status") == "reproduced":
            out.append((f, data))
    return out


RECORDS = _with_output()


@pytest.fixture(scope="module")
def engine():
    return kb.Engine()


def test_every_record_loads():
    # load_evidence skips a damaged record silently (a lookup must never fail on one): a record
    # that no longer loads would drop out of the check below unnoticed.
    loaded = sum(len(v) for v in load_evidence(EVIDENCE).values())
    assert loaded == len(FILES)


def test_records_keep_output():
    # Records written since kb keeps the output; the GPU runs of 2026-11-26 rewrote every record
    # of an entry with a repro, so most records carry it.
    assert len(RECORDS) >= 200


@pytest.mark.parametrize(
    "path,data", RECORDS, ids=[str(p.relative_to(EVIDENCE)) for p, _ in RECORDS]
)
def test_lookup_of_recorded_output_names_its_entry(engine, path, data):
    entry_id = data["entry"]
    matches = engine.lookup(data["output"], top=5).matches
    assert matches, f"{path}: the lookup of the recorded output matched nothing"
    assert matches[0].id == entry_id, (
        f"{path}: the lookup ranks {[m.id for m in matches]}, not {entry_id} first"
    )
    entry = matches[0].entry
    expect = set(entry.repro.expect) if entry.repro else set()
    fired = {h.signature for h in matches[0].hits}
    assert expect <= fired, f"{path}: expected signatures not matched: {sorted(expect - fired)}"


def test_short_output_is_kept_whole_without_line_end_blanks():
    text = "Traceback (most recent call last):  \n  File 'x.py', line 1\nRuntimeError: boom \n\n"
    assert (
        output_excerpt(text)
        == "Traceback (most recent call last):\n  File 'x.py', line 1\nRuntimeError: boom"
    )


def test_long_output_keeps_the_matched_line_whole_and_the_end():
    wording = "RuntimeError: " + "y" * 300  # longer than a record's matched line
    noise = [f"noise {i} " + "x" * 60 for i in range(400)]
    tail = [f"tail {i}" for i in range(50)]
    text = "\n".join([*noise[:200], wording, *noise[200:], *tail])
    shown = (wording[:197] + "...",)  # as the judge cuts it
    got = output_excerpt(text, shown, limit=3000)
    assert len(got) <= 3000 + len(GAP) * 4
    lines = got.splitlines()
    assert wording in lines  # whole, not cut
    assert lines[lines.index(wording) - 1] == noise[199]  # with its neighbours
    assert lines[-1] == tail[-1]  # the end
    assert GAP in lines and "noise 0 " + "x" * 60 not in lines


def test_record_writes_output_as_a_block_and_reads_it_back(tmp_path):
    ev = Evidence(
        entry="x",
        status="reproduced",
        fix_status="fix-verified",
        gpu="NVIDIA H200",
        gpu_memory_mib=143771,
        driver="580.159.04",
        cuda="13.0",
        torch="2.11.0+cu130",
        date="2026-11-26",
        duration_s=1.0,
        output="Traceback (most recent call last):\n  File 'x.py', line 1\nRuntimeError: boom",
    )
    path = write_evidence(tmp_path, ev)
    text = path.read_text(encoding="utf-8")
    assert "output: |-\n  Traceback (most recent call last):\n    File 'x.py', line 1\n" in text
    assert load_evidence(tmp_path)["x"][0].output == ev.output
    bare = write_evidence(tmp_path / "bare", replace(ev, output=""))
    assert "output" not in bare.read_text(encoding="utf-8")  # older records' shape


def test_a_damaged_record_is_reported_with_its_file_and_line(tmp_path):
    from kb.knowledge.evidence import read_evidence

    good = REPO / "evidence" / "cuda-oom"
    (tmp_path / "cuda-oom").mkdir()
    for f in good.glob("*.yaml"):
        (tmp_path / "cuda-oom" / f.name).write_text(f.read_text(encoding="utf-8"))
    (tmp_path / "cuda-oom" / "broken--torch-x.yaml").write_text("entry: cuda-oom\nstatus: [\n")
    (tmp_path / "cuda-oom" / "bad-status--torch-x.yaml").write_text(
        (good / "nvidia-h200--torch-2.11.0-cu130.yaml")
        .read_text(encoding="utf-8")
        .replace("status: reproduced", "status: sort-of")
    )
    (tmp_path / "nccl-error").mkdir()
    (tmp_path / "nccl-error" / "moved--torch-x.yaml").write_text(
        (good / "nvidia-h200--torch-2.11.0-cu130.yaml").read_text(encoding="utf-8")
    )
    records, problems = read_evidence(tmp_path)
    assert len(records["cuda-oom"]) == len(list(good.glob("*.yaml")))  # the good ones still load
    by_file = {Path(p.path).name: p for p in problems}
    assert set(by_file) == {
        "broken--torch-x.yaml",
        "bad-status--torch-x.yaml",
        "moved--torch-x.yaml",
    }
    assert (
        by_file["broken--torch-x.yaml"].line == 3
        and "cannot be read" in by_file["broken--torch-x.yaml"].message
    )
    assert "status" in by_file["bad-status--torch-x.yaml"].message
    assert "folder of 'nccl-error'" in by_file["moved--torch-x.yaml"].message
    assert all(p.code == "KB022" for p in problems)


def test_lint_names_a_damaged_record(tmp_path, monkeypatch, capsys):
    import kb.paths
    from kb.cli.main import main

    (tmp_path / "cuda-oom").mkdir()
    (tmp_path / "cuda-oom" / "x--torch-y.yaml").write_text("entry: cuda-oom\n")
    monkeypatch.setattr(kb.paths, "evidence_folder", lambda: str(tmp_path))
    assert main(["lint"]) == 1
    err = capsys.readouterr()
    assert "x--torch-y.yaml" in err.out + err.err and "KB022" in err.out + err.err


def test_a_cpu_record_names_no_empty_driver_or_cuda():
    gpu = Evidence(
        "cuda-oom",
        "reproduced",
        "fix-verified",
        "NVIDIA H200",
        143771,
        "580.1",
        "13.0",
        "2.11.0+cu130",
        "2026-11-29",
        3.0,
    )
    assert gpu.summary() == (
        "reproduced, fix verified on NVIDIA H200, driver 580.1, torch 2.11.0+cu130, CUDA 13.0, "
        "2026-11-29"
    )
    cpu = replace(gpu, gpu="no GPU", gpu_memory_mib=0, driver="", cuda="", torch="2.13.0+cpu")
    # it read "on no GPU, driver , torch 2.13.0+cpu, CUDA , 2026-11-29"
    assert (
        cpu.summary()
        == "reproduced, fix verified on the CPU (no GPU), torch 2.13.0+cpu, 2026-11-29"
    )
