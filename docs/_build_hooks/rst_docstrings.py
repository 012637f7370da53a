"""A griffe extension: the package's docstrings are written with Sphinx roles and
reStructuredText constructs; render them as Markdown for mkdocstrings.

- ``:class:`X```, ``:meth:`~a.B.m```, ... become code spans (``X``, ``m``);
- ``.. versionadded:: V`` / ``.. versionchanged:: V`` become an italic line;
- a paragraph ending in ``::`` followed by an indented block becomes a fenced block;
- a simple table (``====  ====`` rules) becomes a Markdown table;
- a parameter's default naming a private module constant shows the constant's value.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(
    r":(?:class|meth|func|attr|data|exc|mod|obj|const|ref):`(~?)([^`]+)`"
)
_VERSION = re.compile(r"^(\s*)\.\. version(added|changed)::\s*(\S+)\s*$")
_RULE = re.compile(r"^\s*=+(\s+=+)+\s*$")


def _role(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2).strip()
    if "<" in target and target.endswith(">"):  # :meth:`text <target>`
        target = target.split("<", 1)[0].strip()
    elif short:
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def _table(rows: list[str]) -> list[str]:
    """A simple table's lines (rules included) as a Markdown table. A cell may overflow
    into the next column's space when two spaces still follow it; a line whose first
    column is blank continues the row above."""
    starts = [m.start() for m in re.finditer(r"=+", rows[0])]

    def cells(line: str) -> list[str]:
        parts = re.split(r"\s{2,}", line.strip(), maxsplit=len(starts) - 1)
        if len(parts) == len(starts) and line[: starts[1]].strip():
            return parts
        bounds = [*starts[1:], max(len(line), starts[-1]) + 1]
        return [line[a:b].strip() for a, b in zip(starts, bounds, strict=True)]

    table: list[list[str]] = []
    for line in rows:
        if _RULE.match(line):
            continue
        row = cells(line)
        if table and not line[: starts[1]].strip():
            table[-1] = [
                f"{a} {b}".strip() for a, b in zip(table[-1], row, strict=True)
            ]
        else:
            table.append(row)
    out = ["| " + " | ".join(table[0]) + " |", "|" + " --- |" * len(starts)]
    out += ["| " + " | ".join(row) + " |" for row in table[1:]]
    return out


def markdown(text: str) -> str:
    """The docstring ``text`` in Markdown."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        version = _VERSION.match(line)
        if version:
            word = "Added" if version.group(2) == "added" else "Changed"
            out.append(f"{version.group(1)}*{word} in version {version.group(3)}.*")
            i += 1
            continue
        if _RULE.match(line):
            end = i + 1
            rules = 1
            while end < len(lines) and rules < 3 and lines[end].strip():
                rules += bool(_RULE.match(lines[end]))
                end += 1
            out += ["", *_table(lines[i:end]), ""]
            i = end
            continue
        if line.rstrip().endswith("::") and not line.strip().startswith(".."):
            head = line.rstrip()[:-1]
            out.append(head if not head.endswith(" :") else head[:-2] + ":")
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            block: list[str] = []
            while i < len(lines) and (
                not lines[i].strip() or lines[i].startswith((" ", "\t"))
            ):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            indent = (
                min(len(b) - len(b.lstrip()) for b in block if b.strip())
                if block
                else 0
            )
            out += ["", "```python", *(b[indent:] for b in block), "```", ""]
            continue
        out.append(line)
        i += 1
    return _ROLE.sub(_role, "\n".join(out))


class RstDocstrings(griffe.Extension):
    """Rewrite every docstring of the loaded package as Markdown."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring; show a default that names a private constant
        (``config=_DEFAULT_CONFIG``) as the constant's value."""
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
        if isinstance(obj, griffe.Function):
            for parameter in obj.parameters:
                name = str(parameter.default) if parameter.default is not None else ""
                constant = (
                    obj.module.members.get(name) if name.startswith("_") else None
                )
                if (
                    isinstance(constant, griffe.Attribute)
                    and constant.value is not None
                ):
                    parameter.default = constant.value
