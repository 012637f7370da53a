"""How much CPU does the web console use when nobody looks, and with one page open?
A runnable check, not a unit test.

    python benchmarks/web_idle.py                 # 30 s idle, then 30 s with one page open
    python benchmarks/web_idle.py --seconds 60 --conn /var/lib/myapp/scheduler.db

``hexeract scheduler ui`` is started on a small fresh file (or ``--conn``, opened
read-only), left alone for a few seconds, then its process's CPU time (user + system,
from ``/proc``) is read over ``--seconds`` twice: with no client at all, and with one
client fetching the overview's live part every 5 seconds, as an open page does. Each
is printed as a percentage of one core; the target is < 1 %.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REFRESH_SECONDS = 5.0
TARGET_PERCENT = 1.0


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time so far, in seconds (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def small_file(folder: Path) -> Path:
    """A file with a few schedules of every kind (the tests' set)."""
    from tests.web_support import filled_file

    path, _ = filled_file(folder)
    return path


def wait_up(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("the console exited before it served")
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the console did not start within 30 s")


def measure(pid: int, seconds: float, url: str | None) -> float:
    """Percent of one core the process used over ``seconds``; with ``url``, fetched
    every :data:`REFRESH_SECONDS` as an open page's script does."""
    start_cpu, start = cpu_seconds(pid), time.monotonic()
    while (left := seconds - (time.monotonic() - start)) > 0:
        if url is not None:
            request = urllib.request.Request(url, headers={"X-Hexeract-Fragment": "1"})
            with urllib.request.urlopen(request, timeout=10) as response:
                response.read()
        time.sleep(min(REFRESH_SECONDS, left))
    return 100 * (cpu_seconds(pid) - start_cpu) / (time.monotonic() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="each measurement's length")
    parser.add_argument("--conn", help="serve this database (default: a small fresh file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        conn = args.conn or str(small_file(Path(tmp)))
        port = free_port()
        argv = [sys.executable, "-m", "hexeract_lite", "scheduler", "ui", "--conn", conn]
        proc = subprocess.Popen(
            [*argv, "--port", str(port)],
            stdout=subprocess.DEVNULL,
            env={**os.environ, "HEXERACT_UI_TOKEN": ""},
        )
        try:
            wait_up(port, proc)
            time.sleep(3)  # start-up done
            idle = measure(proc.pid, args.seconds, None)
            polled = measure(proc.pid, args.seconds, f"http://127.0.0.1:{port}/")
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    print(f"idle, no client:        {idle:.3f} % of a core")
    print(f"one page open (5 s):    {polled:.3f} % of a core")
    ok = idle < TARGET_PERCENT and polled < TARGET_PERCENT
    print(f"target < {TARGET_PERCENT} %: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
