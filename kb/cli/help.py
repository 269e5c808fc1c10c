"""`kb help [TOPIC]`: a command's help, or a topic an installed kb carries with it.

Topics are files beside this module (kb/cli/topics/<topic>.md): an installed kb has no docs/ folder
to point at. json: the shape of `--json` output (docs/json.md is the same text, checked by
tests/test_cli_firstuse.py).
"""

from __future__ import annotations

import os
import sys

from kb.exit_codes import OK, USAGE

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterable

TOPICS = {"json": "the shape of kb lookup --json (and of kb show, kb list, kb verify --json)"}


def topic_path(name: str) -> str:
    return os.path.join(os.path.dirname(__file__), "topics", f"{name}.md")


def run_help(
    args: argparse.Namespace,
    build_parser: Callable[..., argparse.ArgumentParser],
    commands: Iterable[str],
) -> int:
    topic = args.topic
    if topic is None:
        build_parser().print_help()
        print("\ntopics (kb help TOPIC):")
        for name, what in TOPICS.items():
            print(f"  {name:10} {what}")
        return OK
    if topic in TOPICS:
        with open(topic_path(topic), encoding="utf-8") as fh:
            sys.stdout.write(fh.read())
        return OK
    commands = [c for c in commands if c != "help"]
    if topic == "triage":  # its own parser (kb.fleet.cli)
        from kb.fleet.cli import main as triage_main

        return triage_main(["--help"])
    if topic in commands:
        try:
            build_parser(only=topic).parse_args([topic, "--help"])
        except SystemExit as e:  # argparse prints the help, then exits 0
            return e.code if isinstance(e.code, int) else OK
        return OK
    known = ", ".join([*TOPICS, *commands])
    print(f"kb help: no command or topic {topic!r}; known: {known}", file=sys.stderr)
    return USAGE


def add_arguments(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("topic", nargs="?", metavar="TOPIC", help="json, or a command's name")
