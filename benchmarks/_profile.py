"""Profile one of hexeract_lite's measurements in this process.

    python benchmarks/_profile.py enqueue            # cProfile, top functions
    python benchmarks/_profile.py drain --batch 100  # run_once() loop over 10k due rows
    python benchmarks/_profile.py drain --pyinstrument

Runs the same function as ``run.py`` (from ``_hexeract``) on a fresh file in a temporary
directory, under cProfile (default) or pyinstrument, and prints where the time went.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common
import _hexeract


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["enqueue", "insert_many", "drain", "claim"])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--mode", default="run_once", choices=["run_once", "run"])
    parser.add_argument("--pyinstrument", action="store_true")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="hexeract-profile-"))
    try:
        path = workdir / "bench.db"
        _common.create_schema(path)
        if args.what in ("drain", "claim"):
            _common.fill(path, args.n)
        call: Callable[[], object]
        if args.what == "enqueue":
            call = lambda: _hexeract.enqueue(str(path), args.n)  # noqa: E731
        elif args.what == "insert_many":
            call = lambda: _hexeract.insert_many(str(path), args.n, args.batch)  # noqa: E731
        elif args.what == "drain":
            call = lambda: _hexeract.drain(str(path), args.n, args.batch, args.mode)  # noqa: E731
        else:
            call = lambda: _hexeract.claim_latency(str(path), args.n // args.batch, args.batch)  # noqa: E731
        if args.pyinstrument:
            from pyinstrument import Profiler

            profiler = Profiler(interval=0.0002)  # type: ignore[no-untyped-call,unused-ignore]
            profiler.start()
            result = call()
            profiler.stop()
            print(profiler.output_text(unicode=True, color=False, show_all=False))
        else:
            prof = cProfile.Profile()
            result = prof.runcall(call)
            stats = pstats.Stats(prof).strip_dirs()
            stats.sort_stats("tottime").print_stats(args.top)
            stats.sort_stats("cumulative").print_stats(args.top)
        print(result)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
