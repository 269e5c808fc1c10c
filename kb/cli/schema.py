"""`kb schema [NAME]`: the fields a file of kb's holds, from the JSON Schema kb checks it against
(what `kb lint` names when a file breaks it; an installed kb has no repository to look into).

NAME: entry (the default: an entry file), evidence (a verification record), or the name of one of
kb/data's files (wrappers, job-wordings...). --json prints the JSON Schema itself.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap

from kb.exit_codes import OK, USAGE

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

# What each schema describes; any other <name>.schema.json beside them is kb/data/<name>.yaml's.
WHAT = {
    "entry": "an entry file (<area>/<id>.yaml)",
    "evidence": "a verification record (evidence/<id>/<record>.yaml)",
}
_WIDTH = 100


def schemas() -> dict[str, str]:
    """name -> the schema file kb checks that kind of file against: entry first."""
    import kb.knowledge

    folder = os.path.dirname(kb.knowledge.__file__)
    out = {"entry": os.path.join(folder, "schema.json")}
    for f in sorted(os.listdir(folder)):
        if f.endswith(".schema.json"):
            out[f.removesuffix(".schema.json")] = os.path.join(folder, f)
    return out


def run_schema(args: argparse.Namespace) -> int:
    name = args.name or "entry"
    known = schemas()
    if name not in known:
        print(f"kb schema: no schema {name!r}; known: {', '.join(known)}", file=sys.stderr)
        return USAGE
    with open(known[name], encoding="utf-8") as fh:
        doc = json.load(fh)
    if args.json:
        json.dump(doc, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return OK
    sys.stdout.write(outline(doc, WHAT.get(name, f"kb/data/{name}.yaml")))
    return OK


def outline(doc: dict[str, Any], what: str) -> str:
    """The schema for people: every field, its type, whether it is required, what it holds."""
    out = [f"The fields of {what}. Required fields are marked *."]
    if doc.get("description"):
        out += ["", *textwrap.wrap(" ".join(str(doc["description"]).split()), _WIDTH)]
    out.append("")
    _fields(doc, doc, 0, out)
    return "\n".join(out) + "\n"


def _resolve(doc: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = doc
        for part in ref[2:].split("/"):
            target = target[part]
        return {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _type(node: dict[str, Any]) -> str:
    t = node.get("type")
    if t == "array":
        items = node.get("items")
        inner = _type(items) if isinstance(items, dict) else ""
        return f"list of {inner}" if inner else "list"
    if isinstance(t, list):
        return " or ".join(t)
    if t is None and "oneOf" in node:
        return " or ".join(_type(n) for n in node["oneOf"] if isinstance(n, dict))
    if t is None and "enum" in node:
        return ""  # its values say it
    return str(t or "any")


def _rules(node: dict[str, Any]) -> list[str]:
    out = []
    if "enum" in node:
        out.append("one of " + ", ".join(str(v) for v in node["enum"]))
    if "pattern" in node:
        out.append(f"matches {node['pattern']}")
    if "minLength" in node:
        out.append(f"at least {node['minLength']} characters")
    if "minItems" in node:
        out.append(f"at least {node['minItems']} item(s)")
    if "default" in node:
        out.append(f"default {json.dumps(node['default'])}")
    return out


def _fields(doc: dict[str, Any], node: dict[str, Any], depth: int, out: list[str]) -> None:
    node = _resolve(doc, node)
    required = set(node.get("required", []))
    indent = "  " * depth
    for name, sub in node.get("properties", {}).items():
        sub = _resolve(doc, sub)
        mark = "*" if name in required else " "
        rules = _rules(sub)
        kind = _type(sub)
        head = f"{indent}{mark} {name}:" + (f" {kind}" if kind else "")
        if rules:
            head += f" ({'; '.join(rules)})" if kind else f" {'; '.join(rules)}"
        out.append(head)
        if sub.get("description"):
            out += textwrap.wrap(
                " ".join(str(sub["description"]).split()),
                _WIDTH,
                initial_indent=indent + "    ",
                subsequent_indent=indent + "    ",
            )
        inner = sub.get("items") if sub.get("type") == "array" else sub
        if isinstance(inner, dict):
            inner = _resolve(doc, inner)
            if inner.get("properties"):
                _fields(doc, inner, depth + 1, out)


def add_arguments(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "name",
        nargs="?",
        metavar="NAME",
        help="which file: entry (the default), evidence, or a data file's name (wrappers...)",
    )
    sp.add_argument("--json", action="store_true", help="the JSON Schema itself")
