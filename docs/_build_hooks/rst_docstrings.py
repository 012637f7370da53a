"""A griffe extension: the package's docstrings are written with Sphinx roles and
reStructuredText constructs; render them as Markdown for mkdocstrings.

- ``:class:`X```, ``:meth:`~a.B.m```, ... become code spans (``X``, ``m``);
- ``.. versionadded:: V`` / ``.. versionchanged:: V`` become an italic line;
- a paragraph ending in ``::`` followed by an indented block becomes a fenced block;
- a simple table (``====  ====`` rules) becomes a Markdown table.
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
    rule = rows[0]
    starts = [m.start() for m in re.finditer(r"=+", rule)]

    def cells(line: str) -> list[str]:
        bounds = [*starts[1:], max(len(line), starts[-1]) + 1]
        return [line[a:b].strip() for a, b in zip(starts, bounds, strict=True)]

    body = [r for r in rows if not _RULE.match(r)]
    out = ["| " + " | ".join(cells(body[0])) + " |", "|" + " --- |" * len(starts)]
    out += ["| " + " | ".join(cells(r)) + " |" for r in body[1:]]
    return out


def markdown(text: str) -> str:
    """The docstring ``text`` in Markdown."""
    text = _ROLE.sub(_role, text)
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
    return "\n".join(out)


class RstDocstrings(griffe.Extension):
    """Rewrite every docstring of the loaded package as Markdown."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring."""
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
