"""Tasks per minute of `posttrain validate` on the built-in terminal-basics suite.

    flock /tmp/posttrain-bench.lock python bench/validate.py [--quick] [--json PATH]

Runs the command as a user does (a subprocess, default checks: 5 oracle runs, up to 8 mutants,
fresh bwrap sandboxes) on `posttrain tasks generate DIR --n N --seed 0`: once with --jobs 1,
once with --jobs 4, each from scratch (--fresh), then the --jobs 4 job again with every check
saved (resumed). Each row records its wall time, tasks per minute and the manifest's counts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from parts.report import add_args, cpu, write_json

CLI = [sys.executable, "-m", "posttrain"]


def posttrain(*args: str) -> None:
    subprocess.run([*CLI, *args], check=True, stdout=subprocess.DEVNULL)


def validate(tasks: Path, out: Path, jobs: int, fresh: bool) -> dict:
    start = time.perf_counter()
    posttrain("validate", str(tasks), "--out", str(out), "--jobs", str(jobs),
              *(["--fresh"] if fresh else []))
    wall = time.perf_counter() - start
    counts = json.loads(out.read_text(encoding="utf-8"))["counts"]
    n = sum(counts.values())
    return {"jobs": jobs, "fresh": fresh, "tasks": n, "wall_s": round(wall, 2),
            "tasks_per_min": round(60 * n / wall, 1), "counts": counts,
            "loadavg_1m_at_end": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap, "6 tasks, not 12")
    a = ap.parse_args()
    n = 6 if a.quick else 12
    result = {"cpu": cpu(loadavg_1m_at_start=os.getloadavg()[0]), "quick": a.quick, "n_tasks": n,
              "command": "posttrain validate DIR --out OUT --jobs J [--fresh]", "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        tasks = Path(tmp) / "suite"
        posttrain("tasks", "generate", str(tasks), "--n", str(n), "--seed", "0")
        for name, jobs, fresh in (("j1", 1, True), ("j4", 4, True), ("j4", 4, False)):
            row = validate(tasks, Path(tmp) / name / "validation.json", jobs, fresh)
            result["rows"].append(row)
            print(f"--jobs {jobs} {'fresh' if fresh else 'resumed'}: {row['wall_s']:.1f} s, "
                  f"{row['tasks_per_min']} tasks/min, {row['counts']}", flush=True)
            write_json(a.json, result)


if __name__ == "__main__":
    main()
