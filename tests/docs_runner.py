"""Runs the code blocks of one documentation page, in order, in this one process.

``python tests/docs_runner.py STEPS.json`` reads a list of steps, each
``{"kind": "file" | "python" | "sh" | "skip", "code": ..., "path": ..., "where": ...,
"postgres": bool}``, and, in the current directory:

- ``file``: writes ``code`` to ``path`` (a leading ``/`` is dropped: the file lands
  under the current directory), creating its folders;
- ``python``: runs ``code`` in the page's one namespace (a fresh ``__main__`` module),
  so a page reads like one session: later blocks use what earlier ones defined;
- ``sh``: runs ``code`` with ``bash -euo pipefail``;
- ``skip``: nothing (a block needing a server the tests do not have).

A ``postgres`` step runs with ``DATABASE_URL`` set to ``HEXERACT_DOCS_POSTGRES_URL``, a
``mysql`` one to ``HEXERACT_DOCS_MYSQL_URL``.
The first failing step ends the run with exit status 1, naming the step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
import types
from pathlib import Path


def main(argv: list[str]) -> int:
    steps = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    sys.path.insert(0, os.getcwd())  # the page's own modules (file steps) import
    # The blocks' namespace is a fresh __main__ module, so what they define can be
    # pickled by reference (a multiprocessing pool's function, say).
    page = types.ModuleType("__main__")
    sys.modules["__main__"] = page
    namespace = vars(page)
    for step in steps:
        where = step["where"]
        saved = os.environ.get("DATABASE_URL")
        if step.get("postgres"):
            os.environ["DATABASE_URL"] = os.environ["HEXERACT_DOCS_POSTGRES_URL"]
        if step.get("mysql"):
            os.environ["DATABASE_URL"] = os.environ["HEXERACT_DOCS_MYSQL_URL"]
        try:
            if step["kind"] == "file":
                path = Path(step["path"].lstrip("/"))
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(step["code"], encoding="utf-8")
            elif step["kind"] == "python":
                exec(compile(step["code"], where, "exec"), namespace)
            elif step["kind"] == "sh":
                done = subprocess.run(["bash", "-euo", "pipefail", "-c", step["code"]])
                if done.returncode:
                    print(f"{where}: exited {done.returncode}", file=sys.stderr)
                    return 1
        except BaseException:
            print(f"{where} failed:", file=sys.stderr)
            traceback.print_exc()
            return 1
        finally:
            if saved is None:
                os.environ.pop("DATABASE_URL", None)
            else:
                os.environ["DATABASE_URL"] = saved
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
