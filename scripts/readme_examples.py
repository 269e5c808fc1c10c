"""Check, or write again, every console example in the README: what each command prints.

    python scripts/readme_examples.py            # exit 1 and show the difference where one is stale
    python scripts/readme_examples.py --write    # write the outputs of today's kb into README.md

A ```console block holds `$ command` lines, each followed by what it prints. A command followed by
no output (or only by a `# comment` on its own line) is usage, shown and never run. A shown output
that ends in a line `...` is cut there: the lines above it must be the first lines kb prints (with
--write, as many lines as were shown). The runnable commands of a block run in order in one bash
(so `echo $?` reads the command before it), in a scratch folder that sees the repository's docs/
and tests/, with NO_COLOR=1, COLUMNS=100 and a KB_HOME of their own, so nothing is written into
the repository.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CUT = "..."
_MARK = "@@kb-readme-example@@"


@dataclass
class Command:
    text: str  # without the "$ "
    line: int  # its index in the README's lines
    shown: list[str] = field(default_factory=list)  # what the README says it prints

    @property
    def runs(self) -> bool:
        return bool(self.shown)

    @property
    def cut(self) -> bool:
        return bool(self.shown) and self.shown[-1] == CUT


@dataclass
class Block:
    start: int  # index of the ```console line
    end: int  # index of the closing ```
    commands: list[Command]


def blocks(lines: list[str]) -> list[Block]:
    out: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```console":
            j = i + 1
            cmds: list[Command] = []
            while j < len(lines) and lines[j].strip() != "```":
                ln = lines[j]
                if ln.startswith("$ "):
                    cmds.append(Command(ln[2:], j))
                elif cmds:
                    cmds[-1].shown.append(ln)
                j += 1
            out.append(Block(i, j, cmds))
            i = j
        i += 1
    return out


def _command_line(text: str) -> str:
    # "kb run -- python train.py   # what it does": the comment is for the reader
    return re.sub(r"\s{2,}#.*$", "", text)


def run_block(block: Block, home: str) -> list[list[str]]:
    """What each runnable command of the block prints (stdout and stderr, as a terminal shows
    them), in order."""
    todo = [c for c in block.commands if c.runs]
    script = ["set +e"]
    for c in todo:
        script += [
            f"{_command_line(c.text)} 2>&1",
            "__rc=$?",
            f"echo {_MARK}",
            "(exit $__rc)",
        ]
    with tempfile.TemporaryDirectory(prefix="kb-readme-") as work:
        for name in ("docs", "tests"):
            os.symlink(REPO / name, Path(work) / name)
        bindir = os.path.dirname(shutil.which("kb") or "") or os.path.dirname(sys.executable)
        env = {
            "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{bindir}{os.pathsep}/usr/bin:/bin",
            "HOME": work,
            "KB_HOME": home,
            "NO_COLOR": "1",
            "COLUMNS": "100",
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(REPO),
        }
        out = subprocess.run(
            ["bash", "-c", "\n".join(script)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        ).stdout
    parts = out.split(_MARK + "\n")
    return [p.splitlines() for p in parts[: len(todo)]]


def expected(c: Command, got: list[str]) -> list[str]:
    """The lines the README should show for this command, given what it printed: the shown
    example's pieces between `...` lines, each as long as it is, taken again from the output.
    The first piece is the output's first lines; a later one starts at the line that starts
    with the same word as the piece's first line (`kb list`'s rows by entry id); a last `...`
    stands for the rest."""
    shown = [ln.rstrip() for ln in c.shown]
    if CUT not in shown:
        return got
    pieces: list[list[str]] = [[]]
    for ln in shown:
        if ln == CUT:
            pieces.append([])
        else:
            pieces[-1].append(ln)
    out: list[str] = []
    pos = 0
    for k, piece in enumerate(pieces):
        if k:
            out.append(CUT)
        if not piece:
            continue
        if k == 0:
            at = 0
        else:
            word = piece[0].split(maxsplit=1)[0] if piece[0].strip() else piece[0]
            at = next(
                (i for i in range(pos, len(got)) if got[i].split(maxsplit=1)[:1] == [word]), -1
            )
            if at < 0:
                out += piece  # not in the output: shown as it was, and reported
                continue
        out += got[at : at + len(piece)]
        pos = at + len(piece)
    if shown[-1] != CUT and pos < len(got):
        out += [CUT]  # the example claims the output ends here, and it does not
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write today's outputs into the README")
    ap.add_argument("--readme", type=Path, default=REPO / "README.md")
    ap.add_argument(
        "--home",
        type=Path,
        help="the KB_HOME the commands run with (default: a new empty one, as a first-time user's)",
    )
    args = ap.parse_args()
    text = args.readme.read_text(encoding="utf-8")
    lines = text.split("\n")
    stale: list[str] = []
    replace: list[tuple[Command, list[str]]] = []
    with tempfile.TemporaryDirectory(prefix="kb-readme-home-") as fresh:
        home = str(args.home) if args.home else fresh
        for b in blocks(lines):
            runnable = [c for c in b.commands if c.runs]
            if not runnable:
                continue
            for c, got in zip(runnable, run_block(b, home)):
                want = expected(c, [ln.rstrip() for ln in got])
                shown = [ln.rstrip() for ln in c.shown]
                if want != shown:
                    stale.append(
                        f"README.md:{c.line + 1}: $ {c.text}\n"
                        + "\n".join(
                            difflib.unified_diff(shown, want, "README", "kb prints", lineterm="")
                        )
                    )
                    replace.append((c, want))
    if args.write and replace:
        for c, want in sorted(replace, key=lambda r: -r[0].line):
            lines[c.line + 1 : c.line + 1 + len(c.shown)] = want
        args.readme.write_text("\n".join(lines), encoding="utf-8")
        print(f"{args.readme}: {len(replace)} example(s) written again")
        return 0
    for s in stale:
        print(s, end="\n\n")
    if stale:
        print(
            f"{len(stale)} README example(s) differ from what kb prints; "
            f"`python {Path(__file__).relative_to(REPO)} --write` writes them again"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
