"""The documentation runs: examples/quickstart.py and every Python block of README.md.

Each README block runs as written, in a fresh process whose current directory, home and
data directory are a fresh temporary folder (so ``SqliteScheduleStore.open()`` makes
its default database there). A block that cannot run on its own (it needs a server the
tests do not have) is marked in the README with an HTML comment on the line before its
fence, ``<!-- not-run: reason -->``; it is still compiled, and every name it imports
from hexeract_lite must exist.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
QUICKSTART = ROOT / "examples" / "quickstart.py"
TIMEOUT_S = 60.0

NOT_RUN = re.compile(r"<!--\s*not-run:\s*(?P<reason>.*?)\s*-->")

EXPECTED_OUTPUT: dict[str, tuple[str, ...]] = {
    "Quick start": ("reminder.due {'user': 42}", "heartbeat None"),
}
"""Lines a block must print, by the heading of its README section. A block that reads
stdin (``input()``) is sent Enter once it has printed all of them."""


@attrs.frozen
class Block:
    """A fenced Python block of a Markdown file."""

    code: str
    line: int
    """The line of its opening fence (1-based)."""
    section: str
    """The text of the nearest heading above it."""
    not_run: str | None
    """The reason of a ``<!-- not-run: reason -->`` marker just before it, if any."""

    @property
    def id(self) -> str:
        return f"README.md:{self.line} ({self.section})"


def python_blocks(markdown: str) -> list[Block]:
    """Every block fenced with ```` ```python ````, with its section and marker."""
    lines = markdown.splitlines()
    blocks: list[Block] = []
    section = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        heading = re.match(r"#{1,6}\s+(.*)", line)
        if heading:
            section = heading.group(1).strip()
        fence = re.match(r"(\s*)```(\S*)", line)
        if fence is None:
            i += 1
            continue
        indent, lang = fence.group(1), fence.group(2)
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith("```"):
            end += 1
        if lang == "python":
            body = [
                text[len(indent) :] if text.startswith(indent) else text
                for text in lines[i + 1 : end]
            ]
            before = i - 1
            while before >= 0 and not lines[before].strip():
                before -= 1
            marker = NOT_RUN.fullmatch(lines[before].strip()) if before >= 0 else None
            blocks.append(
                Block(
                    code="\n".join(body) + "\n",
                    line=i + 1,
                    section=section,
                    not_run=marker.group("reason") if marker else None,
                )
            )
        i = end + 1
    return blocks


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def _env(home: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "HEXERACT_SCHEDULER_TABLE")
    }
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / "data"),
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
    )
    return env


def _pump(stream: IO[str], into: list[str]) -> None:
    for text in stream:
        into.append(text)


@attrs.frozen
class Run:
    code: int | None
    out: str
    err: str


def run_python(argv: list[str], cwd: Path, expected: tuple[str, ...], interactive: bool) -> Run:
    """Run ``python -W error <argv>``; an ``interactive`` one is sent Enter once its
    output holds every ``expected`` line (or after :data:`TIMEOUT_S`)."""
    home = cwd / "home"
    home.mkdir(exist_ok=True)
    with subprocess.Popen(
        [sys.executable, "-W", "error", *argv],
        cwd=cwd,
        env=_env(home),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        out: list[str] = []
        err: list[str] = []
        readers = [
            threading.Thread(target=_pump, args=(proc.stdout, out), daemon=True),
            threading.Thread(target=_pump, args=(proc.stderr, err), daemon=True),
        ]
        for reader in readers:
            reader.start()
        assert proc.stdin is not None
        deadline = time.monotonic() + TIMEOUT_S
        try:
            if interactive:
                while time.monotonic() < deadline and proc.poll() is None:
                    if all(any(e in line for line in out) for e in expected):
                        break
                    time.sleep(0.05)
                if proc.poll() is None:
                    proc.stdin.write("\n")
                    proc.stdin.flush()
            proc.stdin.close()
            proc.wait(timeout=max(deadline - time.monotonic(), 1.0))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for reader in readers:
            reader.join(timeout=5)
    return Run(proc.returncode, "".join(out), "".join(err))


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.not_run is None], ids=lambda b: b.id)
def test_readme_python_block_runs(block: Block, tmp_path: Path) -> None:
    script = tmp_path / "snippet.py"
    script.write_text(block.code, encoding="utf-8")
    expected = EXPECTED_OUTPUT.get(block.section, ())
    run = run_python([str(script)], tmp_path, expected, interactive="input(" in block.code)
    assert run.code == 0, f"{block.id} exited {run.code}\n{block.code}\n{run.out}\n{run.err}"
    for line in expected:
        assert line in run.out, f"{block.id} did not print {line!r}:\n{run.out}"
    assert "Traceback" not in run.err, run.err


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.id)
def test_readme_python_block_compiles_and_imports_what_exists(block: Block) -> None:
    """Also the blocks marked not-run: their syntax and the names they import."""
    tree = ast.parse(block.code, filename=block.id)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hexeract_lite"):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                assert hasattr(module, alias.name), f"{block.id}: {node.module}.{alias.name}"


def test_the_readme_has_python_blocks_and_each_marker_gives_a_reason() -> None:
    assert any(b.section == "Quick start" and b.not_run is None for b in BLOCKS)
    assert all(b.not_run for b in BLOCKS if b.not_run is not None)


def test_a_not_run_marker_is_read_just_before_its_block() -> None:
    markdown = (
        "# Title\n\n```python\nprint(1)\n```\n\n"
        "## Server\n<!-- not-run: needs a PostgreSQL server -->\n\n```python\nconnect()\n```\n"
        "Some text.\n\n```sh\necho no\n```\n"
        "  ```python\n  print(2)\n  ```\n"
    )
    blocks = python_blocks(markdown)
    assert [(b.section, b.not_run, b.code) for b in blocks] == [
        ("Title", None, "print(1)\n"),
        ("Server", "needs a PostgreSQL server", "connect()\n"),
        ("Server", None, "print(2)\n"),
    ]
    assert [b.line for b in blocks] == [3, 10, 18]


def test_the_quickstart_example_runs(tmp_path: Path) -> None:
    db = tmp_path / "quickstart.db"
    run = run_python([str(QUICKSTART), str(db)], tmp_path, (), interactive=False)
    assert run.code == 0, run.out + run.err
    assert run.err == ""
    lines = run.out.splitlines()
    assert lines.count("reminder.due {'user': 42}") == 1  # once: repeats are deduplicated
    assert "heartbeat None" in lines
    from hexeract_lite import SqliteScheduleStore

    with SqliteScheduleStore.open(db, create=False) as store:
        assert store.list_pending() == [], "nothing is left pending"
