"""``python -m local.docs`` (``make docs``): the tables in ``docs/`` that mirror the code,
written between markers from the code itself, so they cannot drift from it.

- the settings (``docs/operations.md``): every field of ``recall.settings.Settings``, its
  environment variable, its default, and the comment block right above it in
  ``settings.py`` (or its ``Field(description=…)``); a block that follows a blank line
  and opens with a short sentence opens a group, that sentence its heading;
- the stack's parameters, the settings it sets and its alarms (``docs/operations.md``), and
  its functions and tables (``docs/architecture.md``), from ``template.yaml``;
- the modules (``docs/modules.md``): every module under ``layers/recall/recall/``,
  ``local/`` and ``functions/``, with its docstring's first sentence;
- the make targets (``docs/local-development.md``), from the Makefile's ``## `` comments,
  as ``make help`` prints them.

A block sits between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->``.
``--check`` writes nothing and exits 1, naming the stale blocks, when a page differs from
what this would write."""

from __future__ import annotations

import argparse
import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
import re
import sys
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel

from local import runtime, template
from recall.settings import Settings

ROOT = template.ROOT
# Importing ``local.runtime`` put the layer, and so ``recall``, on sys.path.
SETTINGS_SOURCE = runtime.LAYER / "recall" / "settings.py"
MODULE_ROOTS = ("layers/recall/recall", "local", "functions")
# A heading is the first sentence of a comment block after a blank line, if this short.
HEADING_MAX_CHARS = 60
SUMMARY_MAX_CHARS = 240


@dataclass(frozen=True)
class Row:
    """One field of ``Settings`` as its table shows it; ``heading`` opens a group."""

    field: str
    default: str
    description: str
    heading: str | None = None


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(text.replace("``", "`").replace("|", "\\|").split())


def _env_value(value: Any) -> str:
    """A default as it would be written in the environment."""
    if isinstance(value, tuple):
        return ",".join(str(part) for part in value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _heading_of(block: list[str]) -> tuple[str | None, str]:
    """A group's comment block: its heading (the first sentence, ended by ``.`` or ``:``)
    and the rest, or no heading when that sentence is too long to be one."""
    text = " ".join(block)
    found = re.match(r"(.+?)(?:[.:](?:\s+|$)|$)", text)
    first = found.group(1).strip() if found else text
    if len(first) > HEADING_MAX_CHARS:
        return None, text
    rest = text[found.end() :].strip() if found else ""
    return first, rest[:1].upper() + rest[1:]


def settings_rows(source: str | None = None, model: type[BaseModel] = Settings) -> list[Row]:
    """Each field in the order ``settings.py`` declares it, described by the comment block
    right above it (or its ``Field(description=…)``); a field with neither has none."""
    lines = (source if source is not None else SETTINGS_SOURCE.read_text()).splitlines()
    fields = model.model_fields
    rows: list[Row] = []
    block: list[str] = []
    opens = after_blank = False
    in_class = False
    for line in lines:
        if line.startswith("class Settings"):
            in_class = True
            continue
        if not in_class:
            continue
        if line and not line.startswith(" "):
            break  # the class ended
        stripped = line.strip()
        if not stripped:
            after_blank, block = True, []
            continue
        if line.startswith("    #"):
            if not block:
                opens = after_blank
            block.append(stripped.lstrip("#").strip())
            continue
        found = re.match(r"    (\w+)\s*:", line)
        after_blank = False
        if found is None or found.group(1) not in fields:
            continue
        heading, comment = _heading_of(block) if block and opens else (None, " ".join(block))
        block = []
        info = fields[found.group(1)]
        described = info.description or comment
        if get_origin(info.annotation) is Literal:
            allowed = ", ".join(f"`{value}`" for value in get_args(info.annotation))
            described = f"{described} One of {allowed}.".strip()
        rows.append(Row(found.group(1), _env_value(info.default), described, heading))
    return rows


def settings_table(rows: list[Row] | None = None) -> str:
    out = [
        "| environment variable | field | default | what it sets |",
        "|---|---|---|---|",
    ]
    for row in rows if rows is not None else settings_rows():
        if row.heading:
            out.append(f"| **{_cell(row.heading)}** | | | |")
        default = f"`{_cell(row.default)}`" if row.default else "(empty)"
        out.append(
            f"| `{row.field.upper()}` | `{row.field}` | {default} | {_cell(row.description)} |"
        )
    return "\n".join(out)


def parameters_table() -> str:
    out = ["| parameter | default | what it sets |", "|---|---|---|"]
    for name, spec in template.load()["Parameters"].items():
        default = spec.get("Default")
        shown = "**required**" if default is None else f"`{default}`" if default else "(empty)"
        text = spec.get("Description", "")
        if "AllowedValues" in spec and len(spec["AllowedValues"]) <= 4:
            text += " One of " + ", ".join(f"`{v}`" for v in spec["AllowedValues"]) + "."
        out.append(f"| `{name}` | {shown} | {_cell(text)} |")
    return "\n".join(out)


def alarms_table() -> str:
    out = ["| alarm | watches | fires when | what it means |", "|---|---|---|---|"]
    for name, resource in template.resources("AWS::CloudWatch::Alarm").items():
        spec = resource["Properties"]
        of = " ".join(_resource_named(d["Value"]) for d in spec.get("Dimensions", []))
        watched = f"`{spec['Namespace']}` `{spec['MetricName']}` of `{of}`"
        when = (
            f"{spec['Statistic']} over {spec['Period']} s "
            f"{_COMPARED[spec['ComparisonOperator']]} {spec['Threshold']}"
        )
        out.append(f"| `{name}` | {watched} | {when} | {_cell(spec['AlarmDescription'])} |")
    return "\n".join(out)


def _resource_named(value: Any) -> str:
    """The logical id a ``!Ref`` or ``!GetAtt`` names, else the value itself."""
    if isinstance(value, dict) and "Ref" in value:
        return str(value["Ref"])
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return str(value["Fn::GetAtt"][0])
    return str(value)


_COMPARED = {
    "GreaterThanThreshold": ">",
    "GreaterThanOrEqualToThreshold": "≥",
    "LessThanThreshold": "<",
    "LessThanOrEqualToThreshold": "≤",
}


def environment_list() -> str:
    """The settings the template sets, for every function and for one."""
    loaded = template.load()
    common = loaded["Globals"]["Function"]["Environment"]["Variables"]
    lines = ["- every function: " + ", ".join(f"`{name}`" for name in common)]
    for name, resource in template.resources("AWS::Serverless::Function").items():
        own = resource["Properties"].get("Environment", {}).get("Variables", {})
        if own:
            lines.append(f"- `{name}`: " + ", ".join(f"`{variable}`" for variable in own))
    return "\n".join(lines)


def functions_table() -> str:
    defaults = template.load()["Globals"]["Function"]
    out = ["| function | code | timeout | memory |", "|---|---|---|---|"]
    for name, resource in template.resources("AWS::Serverless::Function").items():
        spec = resource["Properties"]
        timeout = spec.get("Timeout", defaults.get("Timeout"))
        memory = spec.get("MemorySize", defaults.get("MemorySize"))
        out.append(f"| `{name}` | `{spec['CodeUri']}/app.py` | {timeout} s | {memory} MB |")
    return "\n".join(out)


def _key(schema: list[dict[str, str]], kind: str) -> str:
    return next((f"`{k['AttributeName']}`" for k in schema if k["KeyType"] == kind), "—")


def tables_table() -> str:
    out = [
        "| table | partition key | sort key | indexes | TTL attribute | kept when the stack goes |",
        "|---|---|---|---|---|---|",
    ]
    for name, resource in template.resources("AWS::DynamoDB::Table").items():
        spec = resource["Properties"]
        indexes = [
            f"`{index['IndexName']}` ({_key(index['KeySchema'], 'HASH')} → "
            f"{_key(index['KeySchema'], 'RANGE')})"
            for kind in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes")
            for index in spec.get(kind, [])
        ]
        ttl = spec.get("TimeToLiveSpecification", {}).get("AttributeName")
        kept = "yes" if resource.get("DeletionPolicy") == "Retain" else "no"
        out.append(
            f"| `{name}` | {_key(spec['KeySchema'], 'HASH')} | {_key(spec['KeySchema'], 'RANGE')}"
            f" | {', '.join(indexes) or '—'} | {f'`{ttl}`' if ttl else '—'} | {kept} |"
        )
    return "\n".join(out)


def summary_of(docstring: str | None) -> str:
    """A docstring's first sentence, in Markdown, cut at a word past SUMMARY_MAX_CHARS."""
    text = " ".join((docstring or "").split("\n\n")[0].split())
    found = re.match(r"(.+?(?<!e\.g)(?<!i\.e)[.!?])(?=\s|$)", text)
    sentence = found.group(1) if found else text
    if sentence.endswith(":"):  # a paragraph that introduces a list
        sentence = sentence[:-1] + "."
    if len(sentence) > SUMMARY_MAX_CHARS:
        sentence = sentence[:SUMMARY_MAX_CHARS].rsplit(" ", 1)[0] + " …"
    return _cell(sentence)


def _modules(root: str) -> Iterator[Path]:
    for path in sorted((ROOT / root).rglob("*.py")):
        if "__pycache__" not in path.parts:
            yield path


def modules_table() -> str:
    """One table, a bold row opening each root."""
    out = ["| module | what it holds |", "|---|---|"]
    for root in MODULE_ROOTS:
        out.append(f"| **`{root}/`** | |")
        for path in _modules(root):
            doc = ast.get_docstring(ast.parse(path.read_text()))
            out.append(f"| `{path.relative_to(ROOT / root).as_posix()}` | {summary_of(doc)} |")
    return "\n".join(out)


def make_targets(makefile: str | None = None) -> str:
    """The targets ``make help`` lists, with its text."""
    text = makefile if makefile is not None else (ROOT / "Makefile").read_text()
    out = ["| target | what it does |", "|---|---|"]
    for found in re.finditer(r"^([a-z-]+):.*?## (.*)$", text, re.MULTILINE):
        out.append(f"| `make {found.group(1)}` | {_cell(found.group(2))} |")
    return "\n".join(out)


BLOCKS: dict[str, tuple[str, Callable[[], str]]] = {
    "settings": ("docs/operations.md", settings_table),
    "parameters": ("docs/operations.md", parameters_table),
    "environment": ("docs/operations.md", environment_list),
    "alarms": ("docs/operations.md", alarms_table),
    "functions": ("docs/architecture.md", functions_table),
    "tables": ("docs/architecture.md", tables_table),
    "modules": ("docs/modules.md", modules_table),
    "make-targets": ("docs/local-development.md", make_targets),
}


def with_block(page: str, name: str, body: str) -> str:
    """``page`` with the block ``name`` holding ``body``; a page without its markers is an
    error, never a block appended somewhere."""
    start, end = f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if len(pattern.findall(page)) != 1:
        raise ValueError(f"the page needs exactly one {start} … {end}")
    note = f"{start}\n<!-- written by `make docs` from the code: edit the code, not this -->\n"
    return pattern.sub(lambda _: f"{note}{body}\n{end}", page)


def rendered() -> dict[Path, str]:
    """Every page that holds a block, as ``make docs`` would write it."""
    pages: dict[Path, str] = {}
    for name, (page, render) in BLOCKS.items():
        path = ROOT / page
        text = pages.get(path, path.read_text())
        pages[path] = with_block(text, name, render())
    return pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    stale = {path: text for path, text in rendered().items() if path.read_text() != text}
    for path, text in stale.items():
        if args.check:
            print(f"{path.relative_to(ROOT)} is stale: run make docs", file=sys.stderr)
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
