"""The documentation runs: examples/quickstart.py, every code block of README.md and of
the site's pages (docs/), and the site's reference covers the public API.

Each README Python block runs as written, in a fresh process whose current directory,
home and data directory are a fresh temporary folder (so ``SqliteScheduleStore.open()``
makes its default database there).

Each page of docs/ runs in one fresh process of its own (tests/docs_runner.py), in such a
folder: its blocks in order, Python blocks sharing one namespace (a page reads like one
session), ``sh`` blocks under bash with the ``hexeract`` command on the PATH. A block whose
fence has a ``title="path"`` is a file the reader creates: it is written there, not run.
``text`` blocks show output. A block that cannot run here is marked with an HTML comment
on the line before its fence, ``<!-- not-run: reason -->``; a Python one is still
compiled, and every name it imports from hexeract_lite must exist. A block marked
``<!-- requires: postgres -->`` runs with ``DATABASE_URL`` naming a fresh schema of the
test PostgreSQL server (skipped without one, except in CI); one marked
``<!-- requires: mysql -->`` with ``DATABASE_URL`` naming the test MySQL server (its
``scheduled_messages`` table dropped before and after the page).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import attrs
import pytest

from tests import background

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
QUICKSTART = ROOT / "examples" / "quickstart.py"
TIMEOUT_S = 60.0

DOCS = ROOT / "docs"
RUNNER = Path(__file__).resolve().parent / "docs_runner.py"
NOT_RUN = re.compile(r"<!--\s*not-run:\s*(?P<reason>.*?)\s*-->")
REQUIRES_POSTGRES = re.compile(r"<!--\s*requires:\s*postgres\s*-->")
REQUIRES_MYSQL = re.compile(r"<!--\s*requires:\s*mysql\s*-->")
TITLE = re.compile(r'title="(?P<title>[^"]+)"')
RUN_LANGS = {"python": "python", "sh": "sh", "bash": "sh"}
SHOWN_LANGS = {"text"}
"""Blocks in these languages show output or a layout; they are not run."""

EXPECTED_OUTPUT: dict[str, tuple[str, ...]] = {
    "Quick start": ("reminder.due {'user': 42}", "heartbeat None"),
}
"""Lines a block must print, by the heading of its README section. A block that reads
stdin (``input()``) is sent Enter once it has printed all of them."""


@attrs.frozen
class Block:
    """A fenced block of a Markdown file."""

    code: str
    line: int
    """The line of its opening fence (1-based)."""
    section: str
    """The text of the nearest heading above it."""
    not_run: str | None
    """The reason of a ``<!-- not-run: reason -->`` marker just before it, if any."""
    lang: str = "python"
    title: str | None = None
    """The ``title="..."`` of its fence: the file the reader writes it to."""
    postgres: bool = False
    """Marked ``<!-- requires: postgres -->``."""
    mysql: bool = False
    """Marked ``<!-- requires: mysql -->``."""
    file: str = "README.md"

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line} ({self.section})"


def python_blocks(markdown: str) -> list[Block]:
    """Every block fenced with ```` ```python ````, with its section and marker."""
    return [b for b in fenced_blocks(markdown) if b.lang == "python"]


def fenced_blocks(markdown: str, file: str = "README.md") -> list[Block]:
    """Every fenced block, with its language, title, section and markers."""
    lines = markdown.splitlines()
    blocks: list[Block] = []
    section = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        heading = re.match(r"#{1,6}\s+(.*)", line)
        if heading:
            section = heading.group(1).strip()
        fence = re.match(r"(\s*)```(\S*)(.*)", line)
        if fence is None:
            i += 1
            continue
        indent, lang, info = fence.group(1), fence.group(2), fence.group(3)
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith("```"):
            end += 1
        body = [
            text[len(indent) :] if text.startswith(indent) else text for text in lines[i + 1 : end]
        ]
        before = i - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        comment = lines[before].strip() if before >= 0 else ""
        marker = NOT_RUN.fullmatch(comment)
        title = TITLE.search(info)
        blocks.append(
            Block(
                code="\n".join(body) + "\n",
                line=i + 1,
                section=section,
                not_run=marker.group("reason") if marker else None,
                lang=lang,
                title=title.group("title") if title else None,
                postgres=bool(REQUIRES_POSTGRES.fullmatch(comment)),
                mysql=bool(REQUIRES_MYSQL.fullmatch(comment)),
                file=file,
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
        # the `hexeract` command of this environment, for the pages' shell blocks
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        QT_QPA_PLATFORM="offscreen",
        COLUMNS="100",
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
        background.command([sys.executable, "-W", "error", *argv]),
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


def _readme_block_run(block: Block) -> Callable[[Path], Run]:
    def run(folder: Path) -> Run:
        script = folder / "snippet.py"
        script.write_text(block.code, encoding="utf-8")
        expected = EXPECTED_OUTPUT.get(block.section, ())
        return run_python([str(script)], folder, expected, interactive="input(" in block.code)

    return run


def _quickstart_run(folder: Path) -> tuple[Run, Path]:
    db = folder / "quickstart.db"
    return run_python([str(QUICKSTART), str(db)], folder, (), interactive=False), db


def background_runs(items: list[pytest.Item]) -> dict[str, Callable[[Path], Any]]:
    """The selected README blocks, the quick start and the pages without a MySQL block,
    to start with the session (:mod:`tests.background`)."""
    from tests import pg

    runs: dict[str, Callable[[Path], Any]] = {}
    for item in items:
        assert isinstance(item, pytest.Function)
        params = item.callspec.params if hasattr(item, "callspec") else {}
        if item.originalname == "test_readme_python_block_runs":
            block = params["block"]
            assert isinstance(block, Block)
            runs[f"readme:{block.id}"] = _readme_block_run(block)
        elif item.originalname == "test_the_quickstart_example_runs":
            runs["quickstart"] = _quickstart_run
        elif item.originalname == "test_docs_page_runs":
            page = str(params["page"])
            blocks = PAGE_BLOCKS[page]
            if any(b.mysql for b in blocks):
                continue  # its table is the MySQL server's default one: see page_runs
            url = None
            if any(b.postgres for b in blocks):
                server, _why = pg.server()
                if server is None:
                    continue  # page_runs says why
                url = background.cleanup.enter_context(_postgres_schema(server))
            runs[f"page:{page}"] = functools.partial(_page_run, page, url)
    return runs


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.not_run is None], ids=lambda b: b.id)
def test_readme_python_block_runs(block: Block, tmp_path: Path) -> None:
    expected = EXPECTED_OUTPUT.get(block.section, ())
    run = background.result(f"readme:{block.id}", _readme_block_run(block), tmp_path)
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
    run, db = background.result("quickstart", _quickstart_run, tmp_path)
    assert run.code == 0, run.out + run.err
    assert run.err == ""
    lines = run.out.splitlines()
    assert lines.count("reminder.due {'user': 42}") == 1  # once: repeats are deduplicated
    assert "heartbeat None" in lines
    from hexeract_lite import SqliteScheduleStore

    with SqliteScheduleStore.open(db, create=False) as store:
        assert store.list_pending() == [], "nothing is left pending"


# -- the site's pages ---------------------------------------------------------------------

PAGES = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
PAGE_BLOCKS = {
    page: fenced_blocks((DOCS / page).read_text(encoding="utf-8"), f"docs/{page}") for page in PAGES
}
ALL_BLOCKS = [
    *fenced_blocks(README.read_text(encoding="utf-8")),
    *(b for blocks in PAGE_BLOCKS.values() for b in blocks),
]


def _step(block: Block, postgres: bool, mysql: bool = True) -> dict[str, object]:
    kind = "file" if block.title else RUN_LANGS.get(block.lang, "skip")
    if (
        block.not_run is not None
        or (block.postgres and not postgres)
        or (block.mysql and not mysql)
    ):
        kind = "skip"
    return {
        "kind": kind,
        "code": block.code,
        "path": block.title or "",
        "where": block.id,
        "postgres": block.postgres,
        "mysql": block.mysql,
    }


@contextlib.contextmanager
def _postgres_schema(url: str) -> Iterator[str]:
    """A fresh schema on the server at ``url``, as a URL whose search_path is that
    schema; dropped on exit."""
    import psycopg

    schema = f"docs_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in url else "?"
    try:
        yield f"{url}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


RUN_PAGES = [
    p for p, blocks in PAGE_BLOCKS.items() if any(_step(b, True)["kind"] != "skip" for b in blocks)
]
PAGE_PROCESSES = 4
"""How many pages run at once: most of a page's time is spent waiting (for a due
instant, a subprocess), so they overlap well even on two cores."""


def _run_page(
    page: str, folder: Path, postgres_url: str | None, mysql_url: str | None = None
) -> subprocess.CompletedProcess[str]:
    blocks = PAGE_BLOCKS[page]
    folder.mkdir(parents=True)
    steps = folder / "steps.json"
    steps.write_text(
        json.dumps([_step(b, postgres_url is not None, mysql_url is not None) for b in blocks]),
        encoding="utf-8",
    )
    home = folder / "home"
    home.mkdir()
    env = _env(home)
    if postgres_url is not None:
        env["HEXERACT_DOCS_POSTGRES_URL"] = postgres_url
    if mysql_url is not None:
        env["HEXERACT_DOCS_MYSQL_URL"] = mysql_url
    return subprocess.run(
        background.command([sys.executable, "-W", "error", str(RUNNER), str(steps)]),
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _page_run(page: str, url: str | None, folder: Path) -> subprocess.CompletedProcess[str]:
    return _run_page(page, folder / "page", url)


@pytest.fixture(scope="session")
def page_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]]]]:
    """Every selected page's run, started at once, :data:`PAGE_PROCESSES` at a time."""
    from tests import mysql, pg

    pages: list[str] = [
        str(item.callspec.params["page"])
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.originalname == "test_docs_page_runs"
    ]
    server, why = (
        pg.server() if any(b.postgres for p in pages for b in PAGE_BLOCKS[p]) else ("", "")
    )
    if server is None and pg.in_ci():
        pytest.fail(f"CI must run the PostgreSQL blocks of the docs: {why}")
    my_server, my_why = (
        mysql.server() if any(b.mysql for p in pages for b in PAGE_BLOCKS[p]) else ("", "")
    )
    if my_server is None and pg.in_ci():
        pytest.fail(f"CI must run the MySQL blocks of the docs: {my_why}")
    root = tmp_path_factory.mktemp("docs")
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(PAGE_PROCESSES) as pool:
        runs = {}
        for n, page in enumerate(pages):
            early = background.future(f"page:{page}")
            if early is not None:  # started with the session
                runs[page] = early
                continue
            url = None
            if server and any(b.postgres for b in PAGE_BLOCKS[page]):
                url = stack.enter_context(_postgres_schema(server))
            my_url = None
            if my_server and any(b.mysql for b in PAGE_BLOCKS[page]):
                my_url = my_server
                mysql.drop_table(my_server, "scheduled_messages")
                stack.callback(mysql.drop_table, my_server, "scheduled_messages")
            runs[page] = pool.submit(_run_page, page, root / f"page{n}", url, my_url)
        yield runs
        for run in runs.values():
            run.result()  # the schemas are dropped once their pages are done


@pytest.mark.parametrize("page", RUN_PAGES)
def test_docs_page_runs(
    page: str, page_runs: dict[str, Future[subprocess.CompletedProcess[str]]]
) -> None:
    done = page_runs[page].result()
    assert done.returncode == 0, f"docs/{page}\n{done.stdout}\n{done.stderr}"


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=lambda b: b.id)
def test_every_block_is_run_written_or_shown_or_says_why_not(block: Block) -> None:
    runs = block.lang in RUN_LANGS or block.title is not None
    assert runs or block.lang in SHOWN_LANGS or block.not_run, (
        f'{block.id}: a ```{block.lang} block must run, have a title="file", be text,'
        " or say why not (<!-- not-run: reason -->)"
    )
    if block.lang == "python":
        ast.parse(block.code, filename=block.id)


@pytest.mark.parametrize(
    "block",
    [b for b in ALL_BLOCKS if b.lang == "python" and b.file != "README.md"],
    ids=lambda b: b.id,
)
def test_docs_python_block_imports_what_exists(block: Block) -> None:
    test_readme_python_block_compiles_and_imports_what_exists(block)


def _reference_text() -> str:
    return "\n".join(
        (DOCS / p).read_text(encoding="utf-8") for p in PAGES if p.startswith("reference/")
    )


def test_every_public_name_has_its_api_reference() -> None:
    import hexeract_lite

    documented = set(re.findall(r"^::: (\S+)", _reference_text(), re.MULTILINE))
    wanted = {f"hexeract_lite.{n}" for n in hexeract_lite.__all__ if n != "__version__"}
    wanted |= {
        "hexeract_lite.store.postgres.PostgresScheduleStore",
        "hexeract_lite.hooks",
        "hexeract_lite.upkeep",
        "hexeract_lite.migrate",
    }
    assert wanted - documented == set()


def test_the_errors_table_says_what_each_error_is() -> None:
    import hexeract_lite

    rows = re.findall(
        r"^\| `(\w+)` \| ([^|]+) \|", (DOCS / "reference/errors.md").read_text(), re.MULTILINE
    )
    assert rows
    errors = {
        n
        for n in hexeract_lite.__all__
        if isinstance(getattr(hexeract_lite, n), type)
        and issubclass(getattr(hexeract_lite, n), BaseException)
    }
    assert {name for name, _ in rows} == errors
    for name, bases in rows:
        cls = getattr(hexeract_lite, name)
        said = [b.strip(" `") for b in bases.split(",")]
        assert [b.__name__ for b in cls.__bases__] == said, name


def test_the_configuration_page_has_every_worker_setting() -> None:
    from hexeract_lite import SchedulerWorkerConfig

    text = (DOCS / "reference/configuration.md").read_text(encoding="utf-8")
    for field in attrs.fields(SchedulerWorkerConfig):
        assert f"| `{field.name}` |" in text, field.name


def test_the_cli_reference_is_generated_with_every_command() -> None:
    cli_reference = _build_hook("cli_reference")
    from hexeract_lite.cli.parser import COMMAND_MODULES

    page = cli_reference.on_page_markdown((DOCS / "reference/cli.md").read_text())
    assert cli_reference.MARKER not in page
    for command in COMMAND_MODULES:
        assert f"`hexeract scheduler {command}`" in page, command
    assert "`hexeract scheduler dead-letter replay`" in page


@pytest.mark.parametrize(
    ("page", "text"),
    [
        ("reference/api/worker.md", "config=config"),
        ("howto/testing.md", "claim_due(now, batch_size, lease)"),
        ("reference/api/stores.md", "::: hexeract_lite.ScheduleSnapshot"),
        ("concepts/storage.md", "payload_json"),
        ("concepts/time-zones.md", "next_occurrence("),
        ("howto/postgres.md", "open_store("),
    ],
)
def test_a_fresh_reader_finds_what_the_trial_had_to_dig_for(page: str, text: str) -> None:
    assert text in (DOCS / page).read_text(encoding="utf-8")


README_MAX_LINES = 250


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    for command in ("bash scripts/demo", "bash scripts/test"):
        assert command in text
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / link).is_file(), link


def _parameters(call: str) -> list[str]:
    """The parameter names (and ``*``) of a signature written as ``f(a, *, b=1)``."""
    inner = call[call.index("(") + 1 : call.rindex(")")]
    while re.search(r"\([^()]*\)", inner):
        inner = re.sub(r"\([^()]*\)", "", inner)
    return [part.split("=")[0].strip().lstrip("*") or "*" for part in inner.split(",")]


def test_the_configuration_page_gives_the_openers_signatures() -> None:
    import inspect

    from hexeract_lite import (
        InMemoryScheduleStore,
        SchedulerWorker,
        SqliteScheduleStore,
        open_store,
    )
    from hexeract_lite.store.postgres import PostgresScheduleStore

    text = (DOCS / "reference/configuration.md").read_text(encoding="utf-8")
    openers: list[tuple[str, Callable[..., Any]]] = [
        ("open_store", open_store),
        ("SqliteScheduleStore.open", SqliteScheduleStore.open),
        ("PostgresScheduleStore.open", PostgresScheduleStore.open),
        ("InMemoryScheduleStore", InMemoryScheduleStore),
        ("SchedulerWorker", SchedulerWorker),
    ]
    for name, func in openers:
        written = re.search(rf"`{re.escape(name)}\((.*?)\)`", text, re.DOTALL)
        assert written, name
        said = _parameters(f"({written.group(1)})")
        wanted = []
        for param in inspect.signature(func).parameters.values():
            if param.kind is param.KEYWORD_ONLY and "*" not in wanted:
                wanted.append("*")
            wanted.append(param.name)
        assert said == wanted, name


def test_the_dst_tables_are_the_oracles() -> None:
    from tests.test_dst import transition_day_table

    assert transition_day_table() in (DOCS / "concepts/time-zones.md").read_text(encoding="utf-8")


def test_the_snapshot_table_has_every_field() -> None:
    from hexeract_lite import ScheduleSnapshot

    text = (DOCS / "reference/api/stores.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"`(\w+)`", "\n".join(re.findall(r"^\| (`.*?) \|", text, re.M))))
    assert {f.name for f in attrs.fields(ScheduleSnapshot)} <= listed


def _build_hook(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, DOCS / "_build_hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_version_a_docstring_names_was_released_or_is_the_next() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    released = re.findall(r"^## \[(\d+)\.(\d+)\.(\d+)\]", changelog, re.MULTILINE)
    major, minor, _ = max(tuple(map(int, v)) for v in released)
    known = {".".join(v) for v in released} | {f"{major}.{minor + 1}.0"}
    named = {
        (path.relative_to(ROOT).as_posix(), version)
        for path in (ROOT / "hexeract_lite").rglob("*.py")
        for version in re.findall(
            r"\.\. (?:versionadded|versionchanged|deprecated):: (\d+(?:\.\d+)*)",
            path.read_text(encoding="utf-8"),
        )
    }
    assert named, "the docstrings name the versions of what they describe"
    assert {(p, v) for p, v in named if v not in known} == set(), f"known: {sorted(known)}"


def test_the_docstrings_render_as_markdown() -> None:
    import inspect

    import hexeract_lite.hooks

    rst = _build_hook("rst_docstrings")
    text = rst.markdown(inspect.cleandoc(hexeract_lite.hooks.__doc__ or ""))
    assert "| `MalformedDeadLettered` | a claim met a row it cannot decode" in text
    assert "rescheduled: ``next`` is its next instant) |" in text  # a continued row
    assert ":class:" not in text
    assert rst.markdown(".. versionadded:: 0.2.0") == "*Added in version 0.2.0.*"
    assert rst.markdown("See :meth:`~hexeract_lite.SchedulerWorker.run_once`.") == (
        "See `run_once`."
    )
    assert rst.markdown("Like this::\n\n    x = 1\n\nDone.").splitlines() == [
        "Like this:",
        "",
        "```python",
        "x = 1",
        "```",
        "",
        "Done.",
    ]
