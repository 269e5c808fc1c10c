"""`kb lookup`: read the input safely, run the lookup, print for people or machines."""

from __future__ import annotations

import json
import sys
import zlib

from . import exit_codes
from .engine import default_engine, open_log
from .extract import iter_chunks, scan, scan_text
from .render import Style, use_color
from .report import result_dict, result_markdown, result_text


def _read_scan(args):
    if args.file:
        try:
            with open_log(args.file) as fh:
                return scan(iter_chunks(fh)), None
        except IsADirectoryError:
            return None, f"{args.file} is a folder, not a log file"
        except FileNotFoundError:
            return None, f"no such file: {args.file}"
        except PermissionError:
            return None, f"permission denied: {args.file}"
        except (OSError, EOFError, zlib.error) as e:  # a truncated or corrupt .gz, an I/O error
            return None, f"cannot read {args.file}: {e}"
    if args.stdin:
        if sys.stdin is None:
            return None, "no standard input"
        return scan(iter_chunks(sys.stdin.buffer)), None
    if args.text is None:
        return None, "give the error text, --stdin or --file PATH (see kb lookup --help)"
    # Arguments that were not valid UTF-8 arrive as surrogate escapes; keep their bytes.
    return scan_text(args.text.encode("utf-8", "surrogateescape")), None


def run_lookup(args) -> int:
    if args.top < 1:
        print("kb: --top must be at least 1", file=sys.stderr)
        return exit_codes.USAGE
    s, err = _read_scan(args)
    if err:
        print(f"kb: {err}", file=sys.stderr)
        return exit_codes.USAGE
    engine = default_engine(args.kb_dir)
    kb = engine.knowledge
    for p in kb.problems:
        print(f"kb: {p}", file=sys.stderr)  # a broken entry of the user's is named, not hidden
    result = engine.lookup_scan(s, top=args.top)
    for w in result.warnings:
        print(f"kb: warning: {w}", file=sys.stderr)
    fmt = args.format or ("json" if args.json else "text")
    if fmt == "json":
        json.dump(result_dict(result), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    elif fmt == "markdown":
        sys.stdout.write(result_markdown(result, kb))
    else:
        sys.stdout.write(result_text(result, kb, Style(use_color())))
    return exit_codes.OK if result.matches else exit_codes.NOT_FOUND


