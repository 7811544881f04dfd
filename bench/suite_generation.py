"""Generation cost and size of the generated suites: tasks per minute and MB per task.

    flock /tmp/posttrain-bench.lock python bench/suite_generation.py [--quick] [--json PATH] [--keep DIR]

For each suite (code, terminal-tools, terminal-basics) it times
`suites.generate(suite, DIR, n, seed=0)` and measures the bytes written. The code suite
fetches its pinned wheels from PyPI once into the cache (timed separately as `fetch_s`;
later runs reuse the cache) and spends a fixed `prepare` step per run (baseline test
runs, recording differential cases) before the per-task screening. --keep DIR leaves the
tasks there (for `posttrain validate`). Needs PyPI for the first code run.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import tempfile
import time
from pathlib import Path

from parts.report import add_args, write_json

from posttrain.tasks import suites
from posttrain.tasks.suites.code import host as code_host
from posttrain.tasks.suites.code import pypi


def dir_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def bench_suite(suite: str, n: int, out: Path) -> dict:
    start = time.perf_counter()
    tasks = suites.generate(suite, out, n, seed=0)
    seconds = time.perf_counter() - start
    size = dir_bytes(out)
    return {"suite": suite, "tasks": len(tasks), "seconds": round(seconds, 2),
            "tasks_per_minute": round(60 * len(tasks) / seconds, 1),
            "mb_per_task": round(size / len(tasks) / 1e6, 3)}


def bench_prepare() -> dict:
    start = time.perf_counter()
    for w in (pypi.TOOLZ.wheel, *pypi.PYTEST_WHEELS):
        pypi.fetch(w)
    fetch_s = time.perf_counter() - start
    start = time.perf_counter()
    prep = code_host.prepare(pypi.TOOLZ)
    prepare_s = time.perf_counter() - start
    cases = sum(len(c) for c in prep.cases.values())
    prep.cleanup()
    return {"fetch_s": round(fetch_s, 2), "prepare_s": round(prepare_s, 2),
            "functions_with_cases": len(prep.cases), "differential_cases": cases}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap, "6 code, 12 terminal-tools and 12 terminal-basics tasks (not 52, 54, 64)")
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args()
    sizes = {"code": 6 if args.quick else 52, "terminal-tools": 12 if args.quick else 54,
             "terminal-basics": 12 if args.quick else 64}
    root = args.keep or Path(tempfile.mkdtemp(prefix="posttrain-bench-gen-"))
    prep = bench_prepare()
    rows = [bench_suite(s, n, root / s) for s, n in sizes.items()]
    print(f"code prepare: fetch {prep['fetch_s']} s (cached after the first run), "
          f"prepare {prep['prepare_s']} s, {prep['differential_cases']} differential cases "
          f"over {prep['functions_with_cases']} functions")
    print(f"{'suite':<16}{'tasks':>6}{'seconds':>9}{'tasks/min':>11}{'MB/task':>9}")
    for r in rows:
        print(f"{r['suite']:<16}{r['tasks']:>6}{r['seconds']:>9}{r['tasks_per_minute']:>11}"
              f"{r['mb_per_task']:>9}")
    result = {"suites": rows, "code_prepare": prep, "quick": args.quick,
              "python": platform.python_version()}
    write_json(args.json, result)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
