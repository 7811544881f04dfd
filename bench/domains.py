"""Domain suites: generation cost and size, verifier time, and how rewards grade.

    python bench/domains.py [--quick] [--json PATH]      # the cad rows need .[cad]

generation  tasks per minute and MB per task for each suite at several sizes
            (finance and longctx at 4k / 32k / 128k tokens), with terminal-basics as
            the reference row; one process, one core's worth of work
verify      median seconds of the oracle's verification inside the bwrap sandbox
grading     mean reward of the oracle, of the best generic or domain probe, and of
            each scripted partial agent, over a few tasks per suite, in the sandbox
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from parts.report import add_args, write_json

from posttrain.tasks.suites import generate, probes_for, probes_module
from posttrain.validate import agents
from posttrain.validate.config import ValidateConfig
from posttrain.validate.runs import attempt

SIZES = [("terminal-basics", []), ("finance", ["tokens=4000"]), ("finance", ["tokens=32000"]),
         ("finance", ["tokens=128000"]), ("longctx", ["tokens=4000"]), ("longctx", ["tokens=32000"]),
         ("longctx", ["tokens=128000"]), ("cad", [])]


def _mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def generation(tmp: Path, n: int) -> list[dict]:
    rows = []
    for suite, knobs in SIZES:
        big = any(k.endswith("128000") for k in knobs)
        count = max(2, n // 4) if big else n
        out = tmp / f"{suite}-{'-'.join(knobs) or 'default'}"
        t0 = time.perf_counter()
        generate(suite, out, count, seed=0, knobs=knobs)
        dt = time.perf_counter() - t0
        rows.append({"suite": suite, "knobs": " ".join(knobs), "tasks": count, "seconds": round(dt, 2),
                     "tasks_per_min": round(count / dt * 60, 1), "mb_per_task": round(_mb(out) / count, 3),
                     "dir": str(out)})
        print(f"{suite:16} {' '.join(knobs):14} {count:4d} tasks  {rows[-1]['tasks_per_min']:9.1f}/min  "
              f"{rows[-1]['mb_per_task']:7.3f} MB/task", flush=True)
    return rows


def grading(tmp: Path, n: int) -> list[dict]:
    from posttrain.tasks import load_tasks

    cfg, rows = ValidateConfig(), []
    for suite in ("finance", "longctx", "cad"):
        tasks = load_tasks(generate(suite, tmp / f"grade-{suite}", n, seed=1)[0].path.parent)
        scores: dict[str, list[float]] = {"oracle": [], "best probe": []}
        verify_s = []
        for t in tasks:
            t0 = time.perf_counter()
            scores["oracle"].append(attempt(t, cfg, oracle=True).reward)
            verify_s.append(time.perf_counter() - t0)
            probes = agents.HACKS | probes_for(t)
            scores["best probe"].append(max(attempt(t, cfg, script=p(t)).reward for p in probes.values()))
            module = probes_module(suite)
            for name, make in module.PARTIAL.items():
                scores.setdefault(name, []).append(attempt(t, cfg, script=make(t)).reward)
        row = {"suite": suite, "tasks": len(tasks), "oracle_attempt_s_median": round(statistics.median(verify_s), 2),
               "mean_reward": {k: round(sum(v) / len(v), 3) for k, v in scores.items()}}
        rows.append(row)
        print(f"{suite:8} " + "  ".join(f"{k} {v:.3f}" for k, v in row["mean_reward"].items())
              + f"  (oracle attempt {row['oracle_attempt_s_median']} s)", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap, "8 tasks per size (not 24), 3 graded per suite (not 8)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-domains-"))
    try:
        out = {"generation": generation(tmp, 8 if args.quick else 24),
               "grading": grading(tmp, 3 if args.quick else 8),
               "loadavg_1m_at_end": os.getloadavg()[0], "quick": args.quick}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for r in out["generation"]:
        r.pop("dir")
    write_json(args.json, out)


if __name__ == "__main__":
    main()
