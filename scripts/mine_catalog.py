"""Mine error message templates from local source snapshots into kb/catalog/data/*.jsonl.gz.

    python scripts/mine_catalog.py --mirror /work/.mirror --wheels /tmp/catsrc/wheels [--only pytorch,nccl]

Sources are read where they are: a bare git directory (a repository snapshot, read with
`git ls-tree` / `git cat-file`, no checkout), a wheel (zip), or kb's own data (CUDA's error
strings, kb/data/cuda_codes.json). Only derived data is written: templates with holes, file,
function, op. The output is sorted and gzip'd with fixed headers: the same inputs give the same
bytes. A source whose snapshot is missing is skipped with a message, not an error.

Within one project, an older version keeps only the texts that no newer version of it has, so
pytorch 1.8.0a0's file holds the 1.x-era wordings (THC, THCUNN, TH) and not 2.x's again.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kb.catalog import store
from kb.catalog.mine import Mined, mine_file
from kb.catalog.template import Template

# Folders that hold tests, docs, examples and benchmarks: their raises are not what users see.
SKIP_DIRS = re.compile(
    r"(?:^|/)(?:tests?|testing|test_\w+|docs?|examples?|benchmarks?|third_party|\.github|\.ci|"
    r"tutorials?|notebooks|ci|_vendor|vendor)(?:/|$)"
)
CPP = r"\.(?:cpp|cc|cu|cuh|h|hpp|c|mm)$"


@dataclass
class Spec:
    source: str
    version: str
    kind: str  # git | wheel | cuda-codes
    path: str  # relative to --mirror (git) or --wheels (wheel)
    include: str  # regex over the file path
    origin: str
    note: str = ""
    exclude: str = ""
    version_file: str = ""  # where the version is read, for git snapshots
    version_re: str = ""
    confirm_with: list[str] = field(default_factory=list)  # wheels whose binaries confirm texts
    # (regex, replacement) applied to every mined text: a project's own placeholders and markup
    # written as the catalog's holes, or removed, as its messages are printed
    rewrite: list[tuple[str, str]] = field(default_factory=list)


# pip prints its diagnostics through rich: "[green]...[/]" is colour, not text
RICH_MARKUP = (r"\[(?:/|/?(?:bold|dim|italic|red|green|yellow|blue|magenta|cyan|b|i))\]", "")
# OmegaConf's errors say $KEY, $FULL_KEY, $OBJECT_TYPE ... and fill them when raised
DOLLAR_HOLES = (r"\$([A-Z][A-Z_]*[A-Z])\b", "{\\1}")


SPECS: list[Spec] = [
    Spec(
        "pytorch",
        "2.13.0",
        "wheel",
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
        r"^torch/onnx/.*\.py$",
        "PyPI wheel torch 2.13.0 (CPU build), torch/onnx only: the ONNX exporter's messages",
        note="torch.onnx only; PyTorch's other messages are read from 2.11.0 and older",
    ),
    Spec(
        "pytorch",
        "2.11.0",
        "wheel",
        "torch-2.11.0-cp312-cp312-macosx_11_0_arm64.whl",
        r"^torch/(?:.*\.py|include/(?:ATen|c10|torch)/.*\.(?:h|cuh|hpp))$",
        "PyPI wheel torch 2.11.0 (its Python sources and C++ headers)",
        exclude=r"^torch/testing/_internal/|^torch/include/(?:pybind11|fmt|kineto|google|nlohmann)",
    ),
    Spec(
        "pytorch",
        "2.7.0a0",
        "git",
        "jizhuoran+EasyFHE/repo",
        r"^(?:aten/src/ATen|c10|torch/csrc)/.*" + CPP,
        "pytorch C++ sources (aten, c10, torch/csrc) at version.txt 2.7.0a0, as vendored in "
        "github:jizhuoran/EasyFHE",
        note="pytorch's own repository is over the snapshot size limit; the C++ .cpp/.cu sources "
        "are from this 2.7.0a0 copy (headers and Python come from the 2.11.0 wheel)",
        confirm_with=["linux/torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl"],
    ),
    Spec(
        "pytorch",
        "1.8.0a0",
        "git",
        "K-Wu+pytorch-direct/repo",
        r"^(?:(?:aten/src|c10|torch/csrc)/.*" + CPP + r"|torch/.*\.py)$",
        "pytorch 1.8.0a0 tree in github:K-Wu/pytorch-direct (a research fork of pytorch 1.8)",
        note="1.x-era wordings only (texts that 2.x no longer prints): TH/THC/THCUNN, AT_CHECK",
    ),
    Spec(
        "pytorch",
        "1.4-dev",
        "git",
        "zdevito+ATen/repo/.git",
        r"^aten/src/(?:TH|THC|THCUNN|THNN|ATen)/.*" + CPP,
        "ATen/TH/THC/THCUNN as of 2019-11-20 (github:zdevito/ATen, a mirror of pytorch's aten/)",
        note="pre-1.8 wordings only: THC 'cuda runtime error (N)', THCUNN argument checks",
    ),
    Spec(
        "nccl",
        "",
        "git",
        "NVIDIA+nccl/repo",
        r"^src/.*" + CPP,
        "github:NVIDIA/nccl",
        version_file="makefiles/version.mk",
        version_re=r"NCCL_MAJOR\s*:=\s*(\d+).*?NCCL_MINOR\s*:=\s*(\d+).*?NCCL_PATCH\s*:=\s*(\d+)",
        note="torch 2.11.0 ships NCCL 2.28.9; the status strings and WARN lines read here are "
        "the newest snapshot's",
    ),
    Spec(
        "cuda",
        "13.0",
        "cuda-codes",
        "",
        "",
        "kb/data/cuda_codes.json (cudaGetErrorString, "
        "cuGetErrorString; the CUDA <= 10.0 runtime texts)",
    ),
    Spec(
        "triton",
        "3.6.0",
        "wheel",
        "linux/triton-3.6.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
        r"^triton/.*(?:\.py|\.c|\.h)$",
        "PyPI wheel triton 3.6.0 (the version torch 2.11.0 pins)",
        note="Python sources and C launcher stubs; the MLIR/C++ compiler's messages are not "
        "read (the repository is over the snapshot size limit)",
    ),
    Spec(
        "transformers",
        "5.24.0",
        "wheel",
        "transformers-5.24.0-py3-none-any.whl",
        r"^transformers/.*\.py$",
        "PyPI wheel transformers 5.24.0",
        note="the repository is over the snapshot size limit; the wheel holds the same Python",
    ),
    Spec(
        "accelerate",
        "",
        "git",
        "huggingface+accelerate/repo",
        r"^src/accelerate/.*\.py$",
        "github:huggingface/accelerate",
        version_file="src/accelerate/__init__.py",
        version_re=r"__version__\s*=\s*\"([^\"]+)\"",
    ),
    Spec(
        "huggingface_hub",
        "",
        "git",
        "huggingface+huggingface_hub/repo",
        r"^src/huggingface_hub/.*\.py$",
        "github:huggingface/huggingface_hub",
        version_file="src/huggingface_hub/__init__.py",
        version_re=r"__version__\s*=\s*\"([^\"]+)\"",
    ),
    Spec(
        "safetensors",
        "",
        "git",
        "huggingface+safetensors/repo",
        r"^(?:bindings/python/py_src/safetensors/.*\.py|bindings/python/src/.*\.rs|safetensors/src/.*\.rs)$",
        "github:huggingface/safetensors",
        version_file="bindings/python/Cargo.toml",
        version_re=r"(?m)^version\s*=\s*\"([^\"]+)\"",
    ),
    Spec(
        "datasets",
        "",
        "git",
        "huggingface+datasets/repo",
        r"^src/datasets/.*\.py$",
        "github:huggingface/datasets",
        version_file="src/datasets/__init__.py",
        version_re=r"__version__\s*=\s*\"([^\"]+)\"",
    ),
    Spec(
        "deepspeed",
        "",
        "git",
        "deepspeedai+DeepSpeed/repo",
        r"^(?:deepspeed/.*\.py|csrc/.*" + CPP + r"|op_builder/.*\.py)$",
        "github:deepspeedai/DeepSpeed",
        version_file="version.txt",
        version_re=r"([\w.]+)",
    ),
    Spec(
        "bitsandbytes",
        "",
        "git",
        "bitsandbytes-foundation+bitsandbytes/repo",
        r"^(?:bitsandbytes/.*\.py|csrc/.*" + CPP + r")$",
        "github:bitsandbytes-foundation/bitsandbytes",
        version_file="bitsandbytes/__init__.py",
        version_re=r"__version__\s*=\s*\"([^\"]+)\"",
    ),
    Spec(
        "flash-attention",
        "",
        "git",
        "Dao-AILab+flash-attention/repo",
        r"^(?:flash_attn/.*\.py|hopper/.*(?:\.py|"
        + CPP[1:]
        + r")|csrc/flash_attn/.*"
        + CPP
        + r")$",
        "github:Dao-AILab/flash-attention",
        version_file="flash_attn/__init__.py",
        version_re=r"__version__\s*=\s*\"([^\"]+)\"",
        exclude=r"(?:^|/)cutlass/|/src/flash_\w+_hdim",
    ),
    Spec(
        "xformers",
        "",
        "git",
        "facebookresearch+xformers/repo",
        r"^xformers/.*(?:\.py|" + CPP[1:] + r")$",
        "github:facebookresearch/xformers",
        version_file="version.txt",
        version_re=r"([\w.]+)",
    ),
    Spec(
        "vllm",
        "0.33.0",
        "wheel",
        "linux/vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl",
        r"^vllm/.*\.py$",
        "PyPI wheel vllm 0.33.0",
        note="Python sources only; the repository is over the snapshot size limit, so the "
        "csrc/ kernels' checks are not read",
    ),
    Spec(
        "lightning",
        "",
        "git",
        "Lightning-AI+pytorch-lightning/repo",
        r"^src/(?:lightning|lightning_fabric|pytorch_lightning)/.*\.py$",
        "github:Lightning-AI/pytorch-lightning",
        version_file="src/version.info",
        version_re=r"([\w.]+)",
    ),
    Spec(
        "torchvision",
        "0.26.0",
        "wheel",
        "torchvision-0.26.0-cp312-cp312-macosx_11_0_arm64.whl",
        r"^torchvision/.*\.py$",
        "PyPI wheel torchvision 0.26.0 (pairs with torch 2.11)",
        note="Python sources only; the repository is over the snapshot size limit",
    ),
    Spec(
        "torchaudio",
        "2.11.0",
        "wheel",
        "torchaudio-2.11.0-cp312-cp312-macosx_11_0_arm64.whl",
        r"^torchaudio/.*\.py$",
        "PyPI wheel torchaudio 2.11.0",
        note="Python sources only; the repository is over the snapshot size limit",
    ),
    Spec(
        "apex",
        "",
        "git",
        "NVIDIA+apex/repo",
        r"^(?:apex/.*\.py|csrc/.*" + CPP + r"|apex/.*" + CPP + r")$",
        "github:NVIDIA/apex",
        version_file="setup.py",
        version_re=r"version=\"([^\"]+)\"",
    ),
    Spec(
        "onnxruntime",
        "1.32.0",
        "wheel",
        "linux/onnxruntime-1.32.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        r"^onnxruntime/.*\.py$",
        "PyPI wheel onnxruntime 1.32.0",
        note="Python sources only; the C++ runtime's messages are not read (the repository is "
        "over the snapshot size limit)",
    ),
    Spec(
        "bitsandbytes",
        "0.43.3",
        "wheel",
        "bitsandbytes-0.43.3-py3-none-manylinux_2_24_x86_64.whl",
        r"^bitsandbytes/.*\.py$",
        "PyPI wheel bitsandbytes 0.43.3 (its Python side)",
        note="the 0.43-era wordings only (texts no newer version has): the native library "
        "loader's messages (cextension.py, 'compiled without GPU support')",
    ),
    Spec(
        "bitsandbytes",
        "0.41.3.post2",
        "wheel",
        "bitsandbytes-0.41.3.post2-py3-none-any.whl",
        r"^bitsandbytes/.*\.py$",
        "PyPI wheel bitsandbytes 0.41.3.post2 (its Python side)",
        note="the 0.41-era wordings only: cuda_setup's 'CUDA Setup failed despite GPU being "
        "available' and its diagnosis of the CUDA runtime it found",
    ),
    Spec(
        "peft",
        "",
        "git",
        "huggingface+peft/repo",
        r"^src/peft/.*\.py$",
        "github:huggingface/peft",
        version_file="src/peft/__init__.py",
        version_re=r"__version__\s*=\s*\"([^\"]+)\"",
    ),
    Spec(
        "trl",
        "",
        "git",
        "huggingface+trl/repo",
        r"^trl/.*\.py$",
        "github:huggingface/trl",
        version_file="VERSION",
        version_re=r"([\w.]+)",
    ),
    Spec(
        "tokenizers",
        "",
        "git",
        "huggingface+tokenizers/repo",
        r"^(?:bindings/python/py_src/tokenizers/.*\.py|bindings/python/src/.*\.rs|tokenizers/src/.*\.rs)$",
        "github:huggingface/tokenizers (the Python binding and the Rust library)",
        version_file="bindings/python/Cargo.toml",
        version_re=r"(?m)^version\s*=\s*\"([^\"]+)\"",
    ),
    Spec(
        "hydra",
        "",
        "git",
        "facebookresearch+hydra/repo",
        r"^(?:hydra/.*\.py|plugins/hydra_\w+/hydra_plugins/.*\.py)$",
        "github:facebookresearch/hydra (hydra-core and its plugins)",
        version_file="hydra/__init__.py",
        version_re=r"__version__\s*=\s*\"([^\"]+)\"",
        exclude=r"^hydra/_internal/grammar/gen/|^hydra/grammar/gen/",
    ),
    Spec(
        "omegaconf",
        "",
        "git",
        "omry+omegaconf/repo",
        r"^omegaconf/.*\.py$",
        "github:omry/omegaconf",
        version_file="omegaconf/version.py",
        version_re=r"__version__\s*=\s*\"([^\"]+)\"",
        exclude=r"^omegaconf/grammar/gen/",
        rewrite=[DOLLAR_HOLES],
    ),
    Spec(
        "onnx",
        "",
        "git",
        "onnx+onnx/repo",
        r"^onnx/.*(?:\.py|\.cc|\.h)$",
        "github:onnx/onnx (the checker, shape and type inference, the Python API)",
        version_file="VERSION_NUMBER",
        version_re=r"([\w.]+)",
        exclude=r"^onnx/(?:reference|backend/test|bin|frontend|fuzz)/",
        note="what torch.onnx.export and onnx.checker users meet: fail_check (ValidationError), "
        "fail_shape_inference / fail_type_inference (InferenceError) and the Python raises; the "
        "reference evaluator is not read",
    ),
    Spec(
        "pip",
        "",
        "git",
        "pypa+pip/repo",
        r"^src/pip/_internal/.*\.py$",
        "github:pypa/pip",
        version_file="src/pip/__init__.py",
        version_re=r"__version__\s*=\s*\"([^\"]+)\"",
        note="pip's own messages (its vendored libraries are not read); a diagnostic error's "
        "'error: <reference>' line is a template of its own",
        rewrite=[RICH_MARKUP],
    ),
    Spec(
        "pip",
        "23.3.2",
        "wheel",
        "pip-23.3.2-py3-none-any.whl",
        r"^pip/_internal/.*\.py$",
        "PyPI wheel pip 23.3.2",
        note="the 22.x-23.x wordings only ('Could not build wheels for ..., which is required to "
        "install pyproject.toml-based projects')",
        rewrite=[RICH_MARKUP],
    ),
    Spec(
        "pip",
        "21.1.3",
        "wheel",
        "pip-21.1.3-py3-none-any.whl",
        r"^pip/_internal/.*\.py$",
        "PyPI wheel pip 21.1.3",
        note="the 21.x wordings only ('Command errored out with exit status', 'which use PEP 517 "
        "and cannot be installed directly')",
    ),
    Spec(
        "pip",
        "20.3.4",
        "wheel",
        "pip-20.3.4-py2.py3-none-any.whl",
        r"^pip/_internal/.*\.py$",
        "PyPI wheel pip 20.3.4 (the first with the new resolver on by default)",
        note="the 20.x wordings only",
    ),
]


def git_files(
    gitdir: str, include: re.Pattern[str], exclude: re.Pattern[str] | None
) -> Iterator[tuple[str, str]]:
    names = subprocess.run(
        ["git", "--git-dir", gitdir, "ls-tree", "-r", "--name-only", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    wanted = sorted(
        n
        for n in names
        if include.search(n) and not SKIP_DIRS.search(n) and not (exclude and exclude.search(n))
    )
    if not wanted:
        return
    proc = subprocess.Popen(
        ["git", "--git-dir", gitdir, "cat-file", "--batch"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin and proc.stdout
    for name in wanted:
        proc.stdin.write(f"HEAD:{name}\n".encode())
        proc.stdin.flush()
        header = proc.stdout.readline().split()
        if len(header) < 3 or header[1] != b"blob":
            continue
        size = int(header[2])
        data = proc.stdout.read(size)
        proc.stdout.read(1)
        if size > 3_000_000:
            continue  # generated tables, not hand-written checks
        yield name, data.decode("utf-8", errors="replace")
    proc.stdin.close()
    proc.wait()


def wheel_files(
    path: str, include: re.Pattern[str], exclude: re.Pattern[str] | None
) -> Iterator[tuple[str, str]]:
    with zipfile.ZipFile(path) as zf:
        for name in sorted(zf.namelist()):
            if (
                include.search(name)
                and not SKIP_DIRS.search(name)
                and not (exclude and exclude.search(name))
            ):
                yield name, zf.read(name).decode("utf-8", errors="replace")


def git_version(gitdir: str, spec: Spec) -> tuple[str, str]:
    commit = subprocess.run(
        ["git", "--git-dir", gitdir, "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    version = spec.version
    if not version and spec.version_file:
        text = subprocess.run(
            ["git", "--git-dir", gitdir, "show", f"HEAD:{spec.version_file}"],
            capture_output=True,
            text=True,
        ).stdout
        m = re.search(spec.version_re, text, re.DOTALL)
        if m:
            version = ".".join(g for g in m.groups() if g)
    date = subprocess.run(
        ["git", "--git-dir", gitdir, "log", "-1", "--format=%cs", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return version or f"git-{date}", commit


def merge(source: str, version: str, mined: list[Mined]) -> list[Template]:
    """One template per text (and exception type): the first place that prints it (by path and
    line) is kept, with how many places do."""
    groups: dict[tuple[str, str, str], list[Mined]] = {}
    for m in mined:
        groups.setdefault((m.text, m.exc, "warn" if m.kind == "warn" else ""), []).append(m)
    out: list[Template] = []
    for ms in groups.values():
        ms.sort(key=lambda m: (m.file, m.line))
        first = ms[0]
        op = first.op or next((m.op for m in ms if m.op), "")
        out.append(
            Template(
                source=source,
                version=version,
                text=first.text,
                file=first.file,
                line=first.line,
                func=first.func,
                op=op,
                exc=first.exc,
                kind=first.kind,
                n=len(ms),
            )
        )
    return out


def cuda_templates(repo: str) -> list[Template]:
    """CUDA's own error strings, as PyTorch prints them: 'CUDA error: <text>' (torch >= 1.x,
    runtime API), 'cuda runtime error (N) : <text>' (THC, PyTorch < 1.x with the numbering of
    that era), and the driver API's texts."""
    with open(os.path.join(repo, "kb", "data", "cuda_codes.json"), encoding="utf-8") as fh:
        codes = json.load(fh)
    out: list[Template] = []
    for api, key, fmt in (
        ("runtime", "runtime", "CUDA error: {text}"),
        # THC's THCudaCheck printed where it failed: "... : <text> at <file>:<line>"
        (
            "runtime-legacy",
            "runtime_legacy",
            "cuda runtime error ({code}) : {text} at {{file}}:{{line}}",
        ),
        ("driver", "driver", "CUDA driver error: {text}"),
    ):
        for value, rec in sorted(codes[key].items(), key=lambda kv: int(kv[0])):
            if int(value) == 0:
                continue
            text = rec["text"].replace("{", "{{").replace("}", "}}")
            tmpl = (
                fmt.replace("{text}", text)
                .replace("{code}", str(value))
                .replace("{{file}}", "{file}")
                .replace("{{line}}", "{line}")
            )
            out.append(
                Template(
                    source="cuda",
                    version="13.0",
                    text=tmpl,
                    func=rec["name"],
                    exc="RuntimeError" if api != "driver" else "",
                    kind="status",
                    code=int(value),
                    api=api,
                )
            )
    return out


def binary_strings(wheel: str) -> str:
    """The printable strings of a wheel's shared libraries, one per line (what `strings` gives)."""
    rx = re.compile(rb"[\x20-\x7e\t]{6,}")
    chunks: list[bytes] = []
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if re.search(r"/lib/lib(?:torch|c10)[\w]*\.so", name):
                with zf.open(name) as fh:
                    data = fh.read()
                chunks.extend(rx.findall(data))
    return b"\n".join(chunks).decode("ascii", errors="replace")


def confirm(templates: list[Template], wheel: str, tmpdir: str) -> tuple[set[str], int]:
    """Texts whose longest literal part (16+ characters) is among the wheel's binary strings:
    the message is still in that release. grep -F runs all the patterns in one pass."""
    from kb.catalog.template import parse_text

    probes: dict[str, str] = {}
    for t in templates:
        lits = [p for p in parse_text(t.text) if isinstance(p, str)]
        if not lits:
            continue
        longest = max(lits, key=len).strip()
        if len(longest) >= 16 and "\n" not in longest and longest.isascii():
            probes[t.text] = longest
    strings_path = os.path.join(tmpdir, "strings.txt")
    pats_path = os.path.join(tmpdir, "patterns.txt")
    with open(strings_path, "w", encoding="ascii", errors="replace") as fh:
        fh.write(binary_strings(wheel))
    with open(pats_path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(sorted(set(probes.values()))) + "\n")
    out = subprocess.run(
        ["grep", "-F", "-o", "-h", "-f", pats_path, strings_path],
        capture_output=True,
        text=True,
        env=dict(os.environ, LC_ALL="C"),
    )
    found = set(out.stdout.splitlines())
    return {text for text, probe in probes.items() if probe in found}, len(probes)


def rewrite(text: str, rules: list[tuple[str, str]]) -> str:
    for rx, repl in rules:
        text = re.sub(rx, repl, text)
    return text.strip()


def keep_committed(spec: Spec, out: str, seen: set[str], repo: str) -> None:
    """A version whose snapshot is not here keeps its committed data file, less the texts a
    newer version mined in this run has (the rule every version follows); its texts then count
    as newer for the older versions after it."""
    for path in store.data_files(out):
        info, templates = store.read_file(path)
        if info.source != spec.source or info.origin != spec.origin:
            continue
        if spec.version and info.version != spec.version:
            continue
        kept = [t for t in templates if t.text not in seen]
        seen.update(t.text for t in templates)
        dropped = len(templates) - len(kept)
        if not dropped:
            continue
        note = (info.note + "; " if info.note else "") + (
            f"{dropped} more texts also in a newer version are kept there only"
        )
        info = store.SourceInfo(
            source=info.source,
            version=info.version,
            origin=info.origin,
            commit=info.commit,
            note=note,
        )
        path = store.write(info, kept, out)
        print(
            f"  -> {os.path.relpath(path, repo)}: {len(kept)} templates (committed data, "
            f"{dropped} texts now kept in a newer version)",
            file=sys.stderr,
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", default="/work/.mirror", help="folder of fetched snapshots")
    ap.add_argument("--wheels", default="/tmp/catsrc/wheels", help="folder of downloaded wheels")
    ap.add_argument("--out", default=store.DATA_DIR)
    ap.add_argument("--only", default="", help="comma-separated sources to mine")
    ap.add_argument("--tmp", default="/tmp/catsrc/tmp")
    ap.add_argument(
        "--mapping",
        action="store_true",
        help="only work out every template's mapping again (after editing "
        "kb/catalog/families.yaml or an entry's codes) into data/mapping.json.gz",
    )
    args = ap.parse_args(argv)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if args.mapping:
        return write_mapping(args.out, repo)
    only = {s for s in args.only.split(",") if s}
    os.makedirs(args.tmp, exist_ok=True)

    newer_texts: dict[str, set[str]] = {}  # per project, texts of the versions already mined
    for spec in SPECS:
        if only and spec.source not in only:
            continue
        include = re.compile(spec.include) if spec.include else re.compile("$^")
        exclude = re.compile(spec.exclude) if spec.exclude else None
        commit = ""
        version = spec.version
        if spec.kind == "cuda-codes":
            templates = cuda_templates(repo)
        else:
            loc = os.path.join(args.mirror if spec.kind == "git" else args.wheels, spec.path)
            if not os.path.exists(loc):
                print(f"skip {spec.source} {spec.version}: {loc} is not here", file=sys.stderr)
                keep_committed(spec, args.out, newer_texts.setdefault(spec.source, set()), repo)
                continue
            if spec.kind == "git":
                version, commit = git_version(loc, spec)
                files = git_files(loc, include, exclude)
            else:
                files = wheel_files(loc, include, exclude)
            mined: list[Mined] = []
            nfiles = 0
            for path, src in files:
                nfiles += 1
                mined.extend(mine_file(path, src))
            if spec.rewrite:
                mined = [replace(m, text=rewrite(m.text, spec.rewrite)) for m in mined]
            templates = merge(spec.source, version, mined)
            print(
                f"{spec.source} {version}: {nfiles} files, {len(mined)} sites, "
                f"{len(templates)} templates",
                file=sys.stderr,
            )
        seen = newer_texts.setdefault(spec.source, set())
        older = [t for t in templates if t.text not in seen]
        dropped = len(templates) - len(older)
        seen.update(t.text for t in templates)
        note = spec.note
        if dropped:
            note = (
                note + "; " if note else ""
            ) + f"{dropped} texts also in a newer version are kept there only"
        for wheel in spec.confirm_with:
            wpath = os.path.join(args.wheels, wheel)
            if os.path.exists(wpath):
                ok, probed = confirm(older, wpath, args.tmp)
                note += (
                    f"; {len(ok)} of {probed} templates with a 16+ character literal part were "
                    f"found in the binaries of {os.path.basename(wheel)}"
                )
                confirmed_path = os.path.join(args.tmp, f"{spec.source}-{version}-confirmed.json")
                with open(confirmed_path, "w", encoding="utf-8") as fh:
                    json.dump(sorted(ok), fh)
        info = store.SourceInfo(
            source=spec.source, version=version, origin=spec.origin, commit=commit, note=note
        )
        path = store.write(info, older, args.out)
        print(
            f"  -> {os.path.relpath(path, repo)}: {len(older)} templates, "
            f"{os.path.getsize(path) / 1024:.0f} KiB",
            file=sys.stderr,
        )
    return write_mapping(args.out, repo)


def write_mapping(out: str, repo: str) -> int:
    """Every template's mapping (families.yaml and the entries' codes), kept beside the data so
    a first lookup that needs the catalog does not work it out (kb.catalog.cache)."""
    from kb.catalog import cache

    path = cache.write_mapping(
        os.path.join(out, os.path.basename(cache.MAPPING_FILE)),
        data_dir=None if os.path.abspath(out) == os.path.abspath(store.DATA_DIR) else out,
    )
    print(f"  -> {os.path.relpath(path, repo)}: the mapping of every template", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
