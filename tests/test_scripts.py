"""The developer scripts under scripts/: what they do when asked for help or given nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


SERVERS = ["pg-test-server", "mysql-test-server"]


def _test_server(script: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HEXERACT_PG_PORT": "54399",
        "HEXERACT_PG_DIR": str(tmp_path / "pg"),
        "HEXERACT_MYSQL_PORT": "33099",
        "HEXERACT_MYSQL_DIR": str(tmp_path / "pg"),
    }
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("script", SERVERS)
@pytest.mark.parametrize("flag", ["--help", "-h", "help"])
def test_a_test_server_s_help_prints_its_usage_and_exits_0(
    tmp_path: Path, script: str, flag: str
) -> None:
    result = _test_server(script, tmp_path, flag)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: scripts/{script} start|url|status|stop")
    assert not (tmp_path / "pg").exists()


@pytest.mark.parametrize("script", SERVERS)
@pytest.mark.parametrize("args", [(), ("bogus",)])
def test_a_test_server_without_a_command_starts_nothing(
    tmp_path: Path, script: str, args: tuple[str, ...]
) -> None:
    result = _test_server(script, tmp_path, *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert f"usage: scripts/{script}" in result.stderr
    assert not (tmp_path / "pg").exists()
