"""The README's commands are the ones CI runs, and its examples tell the truth."""

import re
import subprocess
import sys

import pytest
from _repo import REPO

pytestmark = pytest.mark.warm_home  # runs kb as a user would after its first run; tests no cache

README = (REPO / "README.md").read_text(encoding="utf-8")


def fenced_after(heading: str) -> list[str]:
    section = README.split(heading, 1)[1]
    block = re.search(r"```(?:sh|bash|console)?\n(.*?)```", section, re.S).group(1)
    return [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]


def test_ci_runs_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text()
    commands = fenced_after("## Run the tests")
    assert commands, "README must show the test command"
    for cmd in commands:
        cmd = cmd.removeprefix("$ ")
        if cmd.startswith(("python3 -m venv", ". .venv", "source .venv", "cd ")):
            continue
        assert cmd in ci, f"README test command not in .ci/run: {cmd}"


def test_readme_quickstart_command_is_the_documented_one():
    cmds = [c.removeprefix("$ ") for c in fenced_after("## Quick start")]
    assert any("pip install ." in c for c in cmds)
    assert any("kb lookup" in c for c in cmds)


def test_readme_lookup_example_output_is_real():
    """The first `kb lookup` example in Usage prints what the README says it prints."""
    usage = README.split("## Usage", 1)[1]
    m = re.search(r"```console\n\$ (kb lookup [^\n]+)\n(.*?)```", usage, re.S)
    assert m, "Usage must show a kb lookup example with its output"
    cmd, shown = m.group(1), m.group(2)
    import shlex

    argv = shlex.split(cmd)[1:]
    out = subprocess.run(
        [sys.executable, "-m", "kb", *argv],
        capture_output=True,
        text=True,
        env={
            "NO_COLOR": "1",
            "PATH": "/usr/bin:/bin",
            "KB_HOME": __import__("os").environ["KB_HOME"],
        },
        cwd=REPO,
    )
    first_shown = shown.strip().splitlines()[0]
    assert out.stdout.splitlines()[0] == first_shown


def test_every_console_example_is_what_kb_prints():
    """Every ```console example whose output the README shows is what today's kb prints, whole
    (up to a `...` that cuts it): scripts/readme_examples.py runs them and compares."""
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "readme_examples.py")],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]


def test_the_example_checker_sees_a_stale_line(tmp_path):
    """The checker is not a rubber stamp: a README whose example says something kb does not
    print fails it, and --write puts back what kb prints."""
    readme = tmp_path / "README.md"
    readme.write_text(
        '```console\n$ kb lookup "cuda runtime error (4)" | head -2\n'
        "cuda-some-other-entry  not what kb says\n  confidence  low\n```\n",
        encoding="utf-8",
    )
    # one KB_HOME for the three runs: kb's caches are built once, not three times
    script = [sys.executable, str(REPO / "scripts" / "readme_examples.py")]
    script += ["--readme", str(readme), "--home", str(tmp_path / "home")]
    bad = subprocess.run(script, capture_output=True, text=True)
    assert bad.returncode == 1 and "cuda-some-other-entry" in bad.stdout
    subprocess.run([*script, "--write"], check=True)
    assert "cuda-unspecified-launch-failure" in readme.read_text(encoding="utf-8")
    ok = subprocess.run(script, capture_output=True)
    assert ok.returncode == 0


def test_the_python_example_prints_what_its_comments_say(monkeypatch):
    """README's Python block: each expression line is followed by a `# <repr>` comment of what
    it evaluates to; statements run as they are (from the repository's root, as a reader would)."""
    monkeypatch.chdir(REPO)
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"### Python\n\n```python\n(.*?)```", text, re.S)
    assert block is not None
    lines = block.group(1).splitlines()
    ns: dict = {}
    checked = 0
    for i, line in enumerate(lines):
        code = line.split("  #", 1)[0].rstrip()
        if not code or code.startswith("#"):
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if nxt.startswith("# "):
            assert repr(eval(code, ns)) == nxt[2:], code
            checked += 1
        else:
            exec(code, ns)
    assert checked >= 3
