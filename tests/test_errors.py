"""The error classes live in one module, each also the builtin it resembles; the version
is written once, in pyproject.toml."""

from __future__ import annotations

import inspect
import tomllib
from pathlib import Path

import pytest

import hexeract_lite
from hexeract_lite import connect, errors, migrate
from hexeract_lite.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent


def test_every_error_class_is_defined_in_errors_py() -> None:
    defined_elsewhere = []
    for module in (connect, migrate, hexeract_lite.cli):
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ != errors.__name__
                and value.__module__.startswith("hexeract_lite")
            ):
                defined_elsewhere.append(f"{module.__name__}.{name}")
    assert defined_elsewhere == []


def test_the_old_import_paths_still_work() -> None:
    from hexeract_lite.cli import UsageError
    from hexeract_lite.connect import UnsupportedConnection
    from hexeract_lite.migrate import MigrationError

    assert UnsupportedConnection is errors.UnsupportedConnection
    assert MigrationError is errors.MigrationError
    assert UsageError is errors.UsageError


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (errors.UnsupportedConnection, ValueError),
        (errors.UsageError, ValueError),
        (errors.MigrationError, RuntimeError),
        (errors.InvalidArgument, ValueError),
        (errors.ScheduleNotFound, LookupError),
        (errors.StoreError, OSError),
    ],
)
def test_each_error_is_a_scheduler_error_and_its_builtin(
    error: type[Exception], builtin: type[Exception]
) -> None:
    assert issubclass(error, errors.SchedulerError)
    assert issubclass(error, builtin)
    assert error.__name__ in errors.__all__


def test_errors_all_is_written_out_and_names_every_error_class() -> None:
    """``__all__`` names exactly the module's error classes, none forgotten (it is
    written out, not computed, so that a type checker sees ``from errors import *``)."""
    classes = sorted(
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.SchedulerError)
    )
    assert errors.__all__ == classes


def test_unsupported_connection_names_the_scheme() -> None:
    with pytest.raises(errors.UnsupportedConnection, match="'oracle'") as info:
        connect.parse_conn("oracle://user:secret@host/db")
    assert "secret" not in str(info.value)


def test_the_version_comes_from_pyproject_through_the_package_metadata(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        declared = tomllib.load(fh)["project"]["version"]
    assert hexeract_lite.__version__ == declared
    source = (ROOT / "hexeract_lite" / "__init__.py").read_text()
    assert f'"{declared}"' not in source  # not written a second time
    assert cli_main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"hexeract {declared}"
