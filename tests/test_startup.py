"""What a one-line `kb lookup` pays for at start-up (scripts/bench_lookup.py times it): only
the lookup's own subcommand is parsed, and modules only other commands need stay unloaded."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

import pytest
from _repo import REPO

from kb import paths
from kb.cli.main import _COMMANDS, build_parser, plain_lookup
from kb.knowledge.base import gc_paused

MSG = "CUDA error: an illegal memory access was encountered"


def _subcommands(parser) -> set[str]:
    return {
        name
        for action in parser._subparsers._group_actions  # argparse keeps them here
        for name in action.choices
    }


@pytest.mark.parametrize(
    "argv",
    [
        ["lookup", MSG],
        ["lookup", "RuntimeError:", "CUDA", "error"],
        ["lookup", "train.log", "rank1.log"],
        ["lookup", ""],
        ["lookup", "a --json b"],  # one word that holds an option's name is still text
        ["lookup", "--json", MSG],
        ["lookup", MSG, "--json"],
        ["lookup", "--json", "--json", "RuntimeError:", "CUDA", "--json"],
    ],
)
def test_a_plain_lookup_reads_as_argparse_reads_it(argv):
    fast = plain_lookup(argv)
    assert fast is not None
    assert vars(fast) == vars(build_parser(only="lookup").parse_args(argv))


@pytest.mark.parametrize(
    "argv",
    [
        ["lookup"],
        ["lookup", "--json"],
        ["lookup", "RuntimeError:", "--json", "CUDA"],  # argparse refuses the second word
        ["lookup", "--js", MSG],  # argparse's abbreviation
        ["lookup", "--json", "-"],
        ["lookup", "-"],
        ["lookup", MSG, "--top", "1"],
        ["show", "cuda-oom"],
        ["lookup", "--", "-x"],
        [],
    ],
)
def test_anything_else_goes_through_argparse(argv):
    assert plain_lookup(argv) is None


def test_version_takes_no_parser():
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from kb.cli.main import main; rc = main(['--version']);"
            " print(sorted(m for m in ('argparse', 'kb.cli.coverage') if m in sys.modules)); sys.exit(rc)",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    from kb.version import __version__

    assert out.stdout == f"kb {__version__}\n[]\n"


def test_only_the_command_given_is_built():
    assert _subcommands(build_parser(only="lookup")) == {"lookup"}
    assert _subcommands(build_parser()) == set(_COMMANDS) >= {"lookup", "verify", "tui", "show"}


@pytest.mark.parametrize("json_option", [[], ["--json"]])
def test_a_one_line_lookup_loads_no_module_it_does_not_use(tmp_path, json_option):
    """Without KB_HOME (as users run it): the cache folder comes without platformdirs (and the
    tempfile and random it imports); evidence per GPU kind is for show and list; --json is read
    without argparse too. _hashlib is not on the list: every cache file's MAC is checked
    before it is read (docs/reliability.md). Caches are read with _pickle's own loads, not
    through the pure-Python pickle module (kb.model.cpickle)."""
    code = (
        "import sys\n"
        "from kb.cli.main import main\n"
        f"rc = main(['lookup', *{json_option!r}, {MSG!r}])\n"
        "unwanted = ('platformdirs', 'tempfile', 'kb.knowledge.evidence_summary', 'yaml', 'rich',\n"
        "            'dataclasses', 'inspect', 'typing', 'argparse', 'gzip', 'threading',\n"
        "            'shutil', 'hmac', 'hashlib', 'pickle', 'heapq', 'array')\n"
        "print('LOADED', [m for m in unwanted if m in sys.modules], rc)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "KB_HOME"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO
        )
        for _ in range(2)  # the first one builds the entry cache, the second is the cold start
    ]
    assert (tmp_path / "cache" / "kb").is_dir()
    last = runs[-1].stdout.strip().splitlines()[-1]
    assert last == "LOADED [] 0", runs[-1].stdout + runs[-1].stderr


def test_a_file_lookup_reads_no_yaml(tmp_path):
    """A file is read as a job (kb.job): its launcher parsers take their wordings from the
    loaded knowledge base's data, not from kb/data's YAML parsed and schema-checked again."""
    log = tmp_path / "train.log"
    log.write_text(MSG + "\n")
    code = (
        "import sys\n"
        "from kb.cli.main import main\n"
        f"rc = main(['lookup', '--file', {str(log)!r}])\n"
        "print('LOADED', [m for m in ('yaml', 'jsonschema') if m in sys.modules], rc)\n"
    )
    env = dict(os.environ, KB_HOME=str(tmp_path / "home"))
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO
        )
        for _ in range(2)  # the first one builds the entry cache
    ]
    last = runs[-1].stdout.strip().splitlines()[-1]
    assert last == "LOADED [] 0", runs[-1].stdout + runs[-1].stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux rule only")
@pytest.mark.parametrize("xdg", [None, "", "  ", "/tmp/somewhere"])
def test_state_dir_is_where_platformdirs_puts_it(monkeypatch, xdg):
    import platformdirs

    monkeypatch.delenv("KB_HOME", raising=False)
    if xdg is None:
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    assert str(paths.state_dir()) == platformdirs.user_cache_dir("kb", appauthor=False)


def test_gc_paused_restores_the_collector_state():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: left off
    finally:
        gc.enable()
    with pytest.raises(ValueError), gc_paused():
        raise ValueError
    assert gc.isenabled()


@pytest.mark.parametrize("text,code", [(MSG, 0), ("nothing kb knows about here", 1)])
def test_the_kb_command_exits_with_main_s_code(text, code):
    out = subprocess.run(
        [sys.executable, "-m", "kb", "lookup", "--json", text],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert out.returncode == code, out.stderr
    assert isinstance(json.loads(out.stdout), dict)
