"""The `kb` command. Thin: parse arguments, call the library, print, return an exit code.

argparse rather than a third-party CLI library: it is made for the job and costs ~5 ms to import,
and `kb lookup` must start in a few tens of milliseconds. It is imported only when a command line
needs it: `kb lookup TEXT...` with no option is read without it (plain_lookup).

Exit codes: kb/exit_codes.py, the one place they are defined.
"""

from __future__ import annotations

import os
import sys

from kb.errors import KbError
from kb.exit_codes import INTERRUPTED as EXIT_INTERRUPTED
from kb.exit_codes import NOT_FOUND as EXIT_NOTFOUND
from kb.exit_codes import OK as EXIT_OK
from kb.exit_codes import USAGE as EXIT_USAGE
from kb.version import __version__

TYPE_CHECKING = False  # argparse and typing stay unimported on a plain lookup's path
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import NoReturn


def _terminal_columns() -> int:
    """shutil.get_terminal_size().columns, worked out as it does, without importing shutil
    (with the bz2, lzma and fnmatch it loads: a fifth of `kb show --help`)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    try:
        lines = int(os.environ["LINES"])
    except (KeyError, ValueError):
        lines = 0
    if columns <= 0 or lines <= 0:
        try:
            size = os.get_terminal_size(sys.__stdout__.fileno())  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            size = os.terminal_size((80, 24))
        if columns <= 0:
            columns = size.columns or 80
    return columns


def _formatter(base: type[argparse.HelpFormatter]) -> type[argparse.HelpFormatter]:
    """argparse's formatter `base`, given the width argparse would work out itself."""

    class Formatter(base):  # type: ignore[valid-type,misc]
        def __init__(self, prog: str, *args, **kwargs) -> None:
            if kwargs.get("width") is None and len(args) < 3:
                kwargs["width"] = _terminal_columns() - 2
            super().__init__(prog, *args, **kwargs)

    return Formatter


def _parser_class() -> type[argparse.ArgumentParser]:
    import argparse

    class _Parser(argparse.ArgumentParser):
        def __init__(self, *args, **kwargs) -> None:
            kwargs["formatter_class"] = _formatter(
                kwargs.get("formatter_class") or argparse.HelpFormatter
            )
            super().__init__(*args, **kwargs)

        def error(self, message: str):  # argparse's own exit code is 2 too; keep its message short
            self.print_usage(sys.stderr)
            print(f"kb: error: {message}", file=sys.stderr)
            raise SystemExit(EXIT_USAGE)

    return _Parser


def _seconds(positive: bool = False):
    """argparse type: a finite number of seconds, at least 0 (above 0 with positive). `nan` and
    `inf` parse as floats and would make a timeout that never fires or always does."""

    def seconds(text: str) -> float:
        import argparse
        import math

        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
        if not math.isfinite(v) or v < 0 or (positive and v == 0):
            raise argparse.ArgumentTypeError(
                f"{text!r}: give a finite number of seconds{' above 0' if positive else ''}"
            )
        return v

    return seconds


def _count(text: str) -> int:
    """argparse type: a whole number, at least 1 (`--repeat 0` would run nothing and say all
    was well)."""
    import argparse

    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of at least 1")
    return v


def _fmt(examples: str):
    import argparse

    return argparse.RawDescriptionHelpFormatter, "examples:\n" + examples


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with `only`, just that subcommand's (what `main` parses with once it
    knows the command: argparse builds a formatter for every argument it adds, and `kb lookup`
    is timed in milliseconds)."""
    import argparse

    _Parser = _parser_class()
    p = _Parser(
        prog="kb",
        description="Name PyTorch / CUDA failures from raw logs, and prove the "
        "knowledge base on your GPU.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog='examples:\n  kb lookup "CUDA error: an illegal memory access was encountered"\n'
        "  python train.py 2>&1 | kb lookup --stdin\n  kb show cuda-oom\n  kb verify",
    )
    p.add_argument("--version", action="version", version=f"kb {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (help, examples, func, add_arguments) in _COMMANDS.items():
        if only is not None and name != only:
            continue
        fc, ep = _fmt(examples)
        sp = sub.add_parser(name, help=help, description=help, formatter_class=fc, epilog=ep)
        sp.add_argument(
            "--kb-dir",
            action="append",
            default=[],
            metavar="DIR",
            help="an extra folder of your own entries (repeatable; also KB_PATH)",
        )
        sp.set_defaults(func=func)
        if add_arguments is not None:  # None: a command that parses its own (kb triage)
            add_arguments(sp)
    return p


def _progress(label):
    """Word of long work on stderr while it runs, when stderr is a terminal (kb.render.progress)."""
    from kb.render.progress import step

    return step(label)


def _load(args):
    from kb.knowledge.base import load
    from kb.render.progress import reading_label

    with _progress(reading_label):
        return load(args.kb_dir)


def _print_json(obj) -> None:
    import json  # not on the path of a plain-text lookup

    json.dump(obj, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


# ---------------------------------------------------------------- commands
def _cmd_lookup(args) -> int:
    # Run as the kb command: the patterns its start-up compiles come compiled from kb's caches
    # (kb.knowledge.regex_cache), put in place before kb.cli.lookup imports what compiles them.
    seeded = _seed_regexes() if getattr(args, "start_up_gc", False) else True
    from kb.cli.lookup import keep_regexes, run_lookup

    rc = run_lookup(args)
    if not seeded:
        keep_regexes(args)  # the first lookup here that read the cache: for the next ones
    return rc


def _seed_regexes() -> bool:
    """Seed `re` from the table shipped in the wheel, else from the state folder's; whether
    there was one for this interpreter."""
    from kb import paths
    from kb.knowledge import pickle_file, regex_cache, shipped

    name = regex_cache.file_name()
    doc = shipped.read(name, "regex")
    if doc is None:
        doc = pickle_file.read(os.path.join(paths.state_folder(), name))
    return regex_cache.seed(doc) is not None


def _cmd_run(args) -> int:
    from kb.cli.run import run_command

    return run_command(args)


def _cmd_show(args) -> int:
    import kb.render.style as render

    kb = _load(args)
    entry = kb.get(args.id)
    if entry is None:
        close = kb.closest_ids(args.id)
        hint = f" Did you mean: {', '.join(close)}?" if close else " See `kb list`."
        print(f"kb: no entry '{args.id}'.{hint}", file=sys.stderr)
        return EXIT_NOTFOUND
    from kb.knowledge.evidence_summary import gpu_kinds

    evs = kb.evidence_for(entry.id)
    kinds = gpu_kinds(kb.evidence)  # so the entry says which GPUs have not seen it yet
    if args.json:
        _print_json(render.entry_dict(entry, evs))
    elif args.markdown:
        sys.stdout.write(render.entry_markdown(entry, evs, kinds))
    else:
        render.print_entry(entry, evs, kinds=kinds, patterns=args.patterns)
    return EXIT_OK


def _cmd_list(args) -> int:
    from kb.cli.listing import run_list

    return run_list(args)


def _cmd_lint(args) -> int:
    import kb.render.style as render
    from kb.knowledge.base import load
    from kb.lint import lint

    if args.paths:
        missing = [p for p in args.paths if not os.path.exists(p)]
        if missing:
            print(f"kb: no such file or folder: {', '.join(missing)}", file=sys.stderr)
            return EXIT_USAGE
        from pathlib import Path

        with _progress("reading the entry files"):
            kb = load(args.kb_dir, bundled=[Path(p) for p in args.paths], use_cache=False)
    else:
        with _progress("reading the entry files"):
            kb = load(args.kb_dir, use_cache=False)
    from kb import paths

    folders = args.paths or [paths.bundled_entries_folder(), *paths.user_entry_folders(args.kb_dir)]
    files = paths.entry_file_names(folders)
    with _progress("checking the entries") as tick:
        problems = lint(kb, progress=tick)
    if args.json:
        _print_json(
            {
                "files": len(files),
                "entries": len(kb.entries),
                "problems": [render.problem_dict(p) for p in problems],
            }
        )
    else:
        render.print_problems(problems)
        print(
            _lint_summary(len(files), len(kb.entries), problems),
            file=sys.stderr if problems else sys.stdout,
        )
    return EXIT_NOTFOUND if problems else EXIT_OK


def _lint_summary(files: int, entries: int, problems) -> str:
    """Every file counted, read as an entry or not: "1 file checked: 8 problems in it, and it is
    not read as an entry until they are fixed; `kb schema` shows the fields an entry holds"."""

    def n(k: int, one: str, many: str) -> str:
        return f"{k} {one if k == 1 else many}"

    out = n(files, "file", "files") + " checked"
    if not problems:
        return out + f" ({n(entries, 'entry', 'entries')}), no problems"
    where = len({p.path for p in problems})
    unread = max(files - entries, 0)
    if files == 1:
        out += f": {n(len(problems), 'problem', 'problems')} in it"
        if unread:
            out += ", and it is not read as an entry until they are fixed"
    else:
        out += f": {n(len(problems), 'problem', 'problems')} in {n(where, 'file', 'files')}"
        if unread:
            out += f", {unread} of them not read as entries until fixed"
    if any(p.code == "KB004" for p in problems):
        out += "; `kb schema` shows the fields an entry holds"
    return out


def _cmd_code(args) -> int:
    from kb.cli.code import run_code

    return run_code(args)


def _cmd_coverage(args) -> int:
    from kb.cli.coverage import run_coverage

    return run_coverage(args)


def _cmd_schema(args) -> int:
    from kb.cli.schema import run_schema

    return run_schema(args)


def _cmd_help(args) -> int:
    from kb.cli.help import run_help

    return run_help(args, build_parser, _COMMANDS)


def _cmd_index(args) -> int:
    from kb import paths
    from kb.knowledge.index import ensure_index

    kb = _load(args)
    try:
        with _progress(f"building the full-text index in {paths.state_folder()}"):
            path, built = ensure_index(kb, force=args.rebuild)
    except OSError as e:
        print(
            f"kb: cannot write the full-text index in {paths.state_dir()}: {e.strerror or e} "
            f"(set KB_HOME to a writable folder)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    print(f"index {'built' if built else 'is fresh'}: {path} ({len(kb.entries)} entries)")
    return EXIT_OK


def _cmd_verify(args) -> int:
    from kb.cli.verify import run_verify

    return run_verify(args)


def _load_tui() -> Callable[[argparse.Namespace], int]:
    """run_app from kb.tui (an installed wheel ships the TUI there), else from the top-level
    tui package (a source checkout, where tui/ sits beside kb/). A module the TUI itself needs
    and lacks (textual) is not hidden by the fallback."""
    import importlib

    for name in ("kb.tui.app", "tui.app"):
        try:
            return importlib.import_module(name).run_app
        except ModuleNotFoundError as e:
            if e.name not in (name, name.rpartition(".")[0]):
                raise
    raise ModuleNotFoundError("no module named kb.tui or tui", name="kb.tui")


def _cmd_tui(args) -> int:
    try:
        run_app = _load_tui()
    except ImportError as e:
        print(f"kb: the TUI is not available: {e}", file=sys.stderr)
        return EXIT_USAGE
    return run_app(args)


# ---------------------------------------------------------------- arguments of each command
def _args_lookup(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "inputs",
        nargs="*",
        metavar="TEXT|PATH",
        help="the error text (quote it), or log files and folders of one job",
    )
    sp.add_argument("--stdin", action="store_true", help="read the log from standard input")
    sp.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="PATH",
        help="a log file (.gz too); repeat it for a job's per-rank logs",
    )
    sp.add_argument(
        "--batch",
        action="store_true",
        help="look up each file (a folder: each job) on its own, one result per input",
    )
    sp.add_argument(
        "--json", action="store_true", help="machine-readable output (its shape: kb help json)"
    )
    sp.add_argument(
        "--format",
        choices=["text", "json", "jsonl", "markdown", "github"],
        default=None,
        help="jsonl: one object a line (per input with --batch); github: ::error annotations",
    )
    sp.add_argument(
        "--top", type=int, default=3, metavar="N", help="show at most N matches (default 3)"
    )


def _args_run(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--run-dir",
        metavar="DIR",
        help="where the output, error files and trace dumps go (default ./kb-runs/<time>)",
    )
    sp.add_argument(
        "--json", metavar="FILE", help="on failure, also write the diagnosis as JSON to FILE"
    )
    sp.add_argument(
        "--kill-after",
        type=_seconds(),
        default=None,
        metavar="S",
        help="after a signal asks the command to stop (Ctrl-C, SIGTERM), SIGKILL its process "
        "group if it still runs S seconds later (default 30; a third signal: at once)",
    )
    sp.add_argument("argv", nargs="...", metavar="-- COMMAND ...")  # argparse.REMAINDER


def _args_show(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("id")
    sp.add_argument(
        "--patterns", action="store_true", help="also the signatures' regexes, by wording"
    )
    g = sp.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true")
    g.add_argument("--markdown", action="store_true", help="pasteable into a bug report")


def _args_list(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--json", action="store_true")


def _args_lint(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "paths", nargs="*", metavar="PATH", help="entry files or folders (default: all entries)"
    )
    sp.add_argument("--json", action="store_true")


def _args_code(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("code", help="a number, or a cudaError*/CUDA_ERROR_* name")
    sp.add_argument("--json", action="store_true")


def _args_coverage(sp: argparse.ArgumentParser) -> None:
    from kb.cli.coverage import add_arguments

    add_arguments(sp)


def _args_schema(sp: argparse.ArgumentParser) -> None:
    from kb.cli.schema import add_arguments

    add_arguments(sp)


def _args_help(sp: argparse.ArgumentParser) -> None:
    from kb.cli.help import add_arguments

    add_arguments(sp)


def _args_index(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--rebuild", action="store_true", help="rebuild even when it is fresh")


def _args_verify(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("ids", nargs="*", metavar="ID")
    sp.add_argument("--area", action="append", default=[])
    sp.add_argument("--tag", action="append", default=[])
    sp.add_argument(
        "--python",
        default=sys.executable,
        metavar="PATH",
        help="the interpreter that has torch (default: this one)",
    )
    sp.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="repros run side by side (default: half the CPU cores, at most 8; "
        "memory-hungry ones always run alone)",
    )
    sp.add_argument(
        "--repeat",
        type=_count,
        default=1,
        metavar="N",
        help="run every repro and fix check N times; runs that disagree are 'flaky'",
    )
    sp.add_argument(
        "--timeout",
        type=_seconds(positive=True),
        default=None,
        metavar="S",
        help="per-entry timeout in seconds (default: the entry's own, else 120)",
    )
    sp.add_argument("--record", action="store_true", help="write evidence records into the repo")
    sp.add_argument(
        "--evidence-dir",
        metavar="DIR",
        help="where --record writes (default: the checkout's evidence/; for an installed kb, "
        "./evidence)",
    )
    sp.add_argument(
        "--trust", action="store_true", help="also run repros of your own (local) entries"
    )
    sp.add_argument("--json", action="store_true")


def _args_tui(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "path", nargs="?", metavar="PATH", help="a log file, or a job's folder (its ranks' logs)"
    )
    sp.add_argument("--file", metavar="PATH", help="a log file")


# name -> (help, examples, what runs it, its arguments), in the order `kb --help` lists them
_COMMANDS: dict[
    str,
    tuple[
        str,
        str,
        Callable[[argparse.Namespace], int] | None,
        Callable[[argparse.ArgumentParser], None] | None,
    ],
] = {
    "lookup": (
        "Find the entry for an error message, a whole log, or a whole job.",
        '  kb lookup "CUDA error: device-side assert triggered"\n'
        "  kubectl logs trainer-0 | kb lookup --stdin --json\n  kb lookup --file run.log.gz --top 3\n"
        "  kb lookup logs/rank*.log            # one job: the root rank and the others' part\n"
        "  kb lookup /tmp/torchelastic_x/      # torchrun --log-dir, error files, trace dumps\n"
        "  kb lookup --batch --format jsonl ci-logs/*.log",
        _cmd_lookup,
        _args_lookup,
    ),
    "run": (
        "Run a command (python, torchrun, srun...), and diagnose it if it fails.",
        "  kb run -- torchrun --nproc_per_node=8 train.py\n"
        "  kb run --run-dir runs/exp1 --json diagnosis.json -- python train.py\n"
        "  srun kb run -- python train.py",
        _cmd_run,
        _args_run,
    ),
    "show": (
        "Show one entry in full.",
        "  kb show cuda-oom\n  kb show cuda-oom --patterns\n  kb show cuda-oom --markdown > issue.md",
        _cmd_show,
        _args_show,
    ),
    "list": (
        "List the entries.",
        "  kb list\n  kb list --json | jq '.[].id'",
        _cmd_list,
        _args_list,
    ),
    "lint": (
        "Check entry files: schema, regexes, examples, ids.",
        "  kb lint\n  kb lint my-entries/\n  kb lint --json entries/cuda/cuda-oom.yaml",
        _cmd_lint,
        _args_lint,
    ),
    "code": (
        "Explain a CUDA error code in every numbering era.",
        "  kb code 700\n  kb code 4\n  kb code cudaErrorAssert",
        _cmd_code,
        _args_code,
    ),
    "coverage": (
        "What the message catalog holds per source, and how much of it maps to an entry.",
        "  kb coverage\n  kb coverage --brief\n  kb coverage --source pytorch --json",
        _cmd_coverage,
        _args_coverage,
    ),
    "triage": (
        "Many failed jobs at once: one row per job into Parquet or DuckDB, with a summary.",
        "  kb triage /data/failed-jobs/2026-11-26 --out day.duckdb\n"
        '  kb triage --sql "select host, count(*) from faulty_nodes group by host" day.duckdb',
        None,
        None,
    ),
    "schema": (
        "The fields an entry file (or a record, or a data file) holds: what kb lint checks.",
        "  kb schema\n  kb schema evidence\n  kb schema --json > entry.schema.json",
        _cmd_schema,
        _args_schema,
    ),
    "help": (
        "Help on a command, or a topic: json (the shape of --json output).",
        "  kb help json\n  kb help lookup",
        _cmd_help,
        _args_help,
    ),
    "index": (
        "Build or rebuild the full-text index.",
        "  kb index --rebuild",
        _cmd_index,
        _args_index,
    ),
    "verify": (
        "Run entries' repros on this machine's GPU and check them with the lookup.",
        "  kb verify\n  kb verify cuda-oom cuda-device-side-assert -j 4\n"
        "  kb verify --record --json > verify.json",
        _cmd_verify,
        _args_verify,
    ),
    "tui": (
        "Interactive: paste an error, read the diagnosis, run the repro.",
        "  kb tui\n  kb tui train.log\n  kb tui runs/exp1      # a job's folder: its ranks, the root cause first\n"
        "  python train.py 2>&1 | kb tui",
        _cmd_tui,
        _args_tui,
    ),
}


def plain_lookup(argv: list[str]):
    """What argparse makes of `kb lookup TEXT...` and `kb lookup --json TEXT...` (--json
    before or after the words), made without it.

    The most common commands, and the ones timed against `python -c pass`: argparse's import,
    the gettext and locale it loads and the formatter it builds cost a fifth of a cold lookup.
    Any other word starting with '-' (another option, '--', '-' for stdin), or --json among the
    words (which argparse refuses), goes through argparse as before; tests/test_startup.py
    holds the two results equal."""
    if len(argv) < 2 or argv[0] != "lookup":
        return None
    words = argv[1:]
    start, end = 0, len(words)
    while start < end and words[start] == "--json":
        start += 1
    while end > start and words[end - 1] == "--json":
        end -= 1
    inputs = words[start:end]
    if not inputs or any(w.startswith("-") for w in inputs):
        return None
    from types import SimpleNamespace

    return SimpleNamespace(
        command="lookup",
        kb_dir=[],
        func=_cmd_lookup,
        inputs=inputs,
        stdin=False,
        file=[],
        batch=False,
        json=len(inputs) < len(words),
        format=None,
        top=3,
    )


def main(argv: list[str] | None = None, *, one_shot: bool = False) -> int:
    """The command line's exit code. one_shot: the process ends with this command (`kb`
    itself, not a program or test calling main): a lookup then runs its start-up without the
    cyclic garbage collector and freezes what it loaded (kb.cli.lookup)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--version"]:
        print(f"kb {__version__}")  # as argparse's version action prints it
        return EXIT_OK
    if argv and argv[0] == "triage":
        # kb.fleet.cli owns its arguments (and its own --help): the fleet view is its own tool.
        from kb.fleet.cli import main as triage_main

        return triage_main(argv[1:])
    args = plain_lookup(argv)
    if args is None:
        # The command is always the first word (kb's own options are --help and --version only).
        parser = build_parser(only=argv[0] if argv and argv[0] in _COMMANDS else None)
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_help()
            return EXIT_USAGE
    missing = [d for d in getattr(args, "kb_dir", None) or [] if not os.path.isdir(d)]
    if missing:
        print(f"kb: --kb-dir {missing[0]}: no such folder", file=sys.stderr)
        return EXIT_USAGE
    # KB_PATH is --kb-dir said once for every command: a folder it names that is not there is
    # the same mistake (a typo would otherwise leave the user's entries out without a word).
    env_dirs = os.environ.get("KB_PATH", "").split(os.pathsep)
    env_missing = [d for d in env_dirs if d and not os.path.isdir(d)]
    if env_missing:
        print(f"kb: KB_PATH names {env_missing[0]}: no such folder", file=sys.stderr)
        return EXIT_USAGE
    if one_shot and args.command == "lookup":
        # Importing kb's modules and unpickling the knowledge base make tens of thousands of
        # objects that all stay: collecting meanwhile finds nothing and cost a one-line lookup
        # ~3 ms. kb.cli.lookup freezes them and turns the collector back on once it is loaded.
        import gc

        gc.disable()
        args.start_up_gc = True
    try:
        rc = args.func(args)
        sys.stdout.flush()
        return rc
    except KbError as e:
        print(f"kb: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("kb: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `kb show ID | head -1`: the reader went away, which is no error. Point stdout at
        # /dev/null so the interpreter's final flush does not complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def run() -> NoReturn:
    """The `kb` command (console script and `python -m kb`): main(), then exit.

    Before exiting, every object is moved out of the garbage collector's reach (gc.freeze):
    the interpreter's last collection would otherwise walk the whole loaded knowledge base, a
    fifth of a one-line lookup's time, to find nothing. Only here, never in main(), which
    programs and tests call in their own long-lived processes."""
    rc = main(one_shot=True)
    import gc

    gc.freeze()
    if sys.argv[1:2] == ["lookup"]:
        _exit_now(rc)
    sys.exit(rc)


def _exit_now(rc: int) -> None:
    """End a lookup's process without the interpreter's finalization, which tears every module
    and object down one by one (~2.5 ms of a one-line lookup, to free memory the process gives
    back anyway), when nothing is left for it to do: no atexit callback (a profiler, coverage,
    a temporary folder to remove), no threading module (threads to wait for), both standard
    streams flushed. Returns when any of that does not hold; the caller then exits as usual."""
    import atexit

    pending = getattr(atexit, "_ncallbacks", None)
    if pending is None or pending() or "threading" in sys.modules:
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return  # said by the usual exit (a closed pipe, a full disk)
    os._exit(rc)


if __name__ == "__main__":  # pragma: no cover
    run()
