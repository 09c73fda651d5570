"""Fill the cache ahead of a class: run every notebook once, outputs discarded, and say how long each took.

    python -m tools.prefill notebooks/0*.ipynb           # make prefill (FAST=1: fast mode, BERTLOOK_FAST)
    python -m tools.prefill --warm --record benchmarks/timings.json notebooks/[0-9]*.ipynb

--warm runs each notebook a second time, now from the filled cache; --record writes the seconds to a JSON file
(the contents table shows benchmarks/timings.json, recorded from a cold cache on a 2-core machine).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import nbformat
from nbclient.exceptions import CellExecutionError

from tools import export

ROOT = Path(__file__).resolve().parents[1]


def run(path: Path) -> float:
    """Execute one notebook from its own folder (over IPC, as `make run` does), outputs discarded; the seconds
    it took."""
    start = time.perf_counter()
    export.execute(nbformat.read(path, as_version=4), path.parent)
    return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--warm", action="store_true", help="run each notebook again from the filled cache")
    parser.add_argument("--record", type=Path, help="write the seconds to this JSON file")
    args = parser.parse_args(argv)
    mode = "fast" if os.environ.get("BERTLOOK_FAST", "").strip() not in ("", "0") else "full"
    print(f"prefilling the cache ({mode} mode, {len(args.notebooks)} notebooks)", flush=True)
    times: dict[str, dict[str, float]] = {}
    total = time.perf_counter()
    failed = []
    for path in args.notebooks:
        try:
            times[path.stem] = {"first": round(run(path), 1)}
            if args.warm:
                times[path.stem]["warm"] = round(run(path), 1)
        except CellExecutionError as error:  # say which notebook and go on: the others still fill the cache
            failed.append(path.stem)
            print(f"  {path.stem:<28} FAILED: {str(error).strip().splitlines()[-1]}", flush=True)
            continue
        line = f"  {path.stem:<28} {times[path.stem]['first']:7.1f} s"
        if args.warm:
            line += f"   again from the cache: {times[path.stem]['warm']:6.1f} s"
        print(line, flush=True)
    minutes = (time.perf_counter() - total) / 60
    print(f"done in {minutes:.1f} min; the cache (data/cache) now holds the results of "
          f"{len(args.notebooks) - len(failed)} of {len(args.notebooks)} notebooks")
    if args.record:
        args.record.write_text(json.dumps({"mode": mode, "cpus": os.cpu_count(), "machine": platform.machine(),
                                           "python": platform.python_version(), "seconds": times}, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
