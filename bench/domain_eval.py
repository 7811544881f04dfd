"""Domain suites by difficulty: `posttrain eval` of one model on every suite, level by level.

    flock /tmp/posttrain-bench.lock python bench/domain_eval.py --model DIR --code-tasks DIR \
        [--per-level 10] [-k 2] [--quick] [--json PATH]

For each suite (finance, longctx, cad, code, terminal-tools) it builds `--per-level` tasks at
each difficulty level (easy, medium, hard), runs one eval job per suite (the embedded engine,
the text protocol, the real bwrap sandbox and verifier) and prints the task-clustered mean
reward with its 95% CI per level, from the job's `per_domain` summary. The cad rows need
`pip install -e '.[cad]'`. Code tasks take ~12 s each to make, so `--code-tasks` points at a
generated code suite (`posttrain tasks generate DIR --suite code --n 52`) to pick them from.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

from parts.report import add_args, write_json

from posttrain.evals.launch import EvalRequest, evaluate
from posttrain.tasks import load_tasks
from posttrain.tasks.suites import generate

LEVELS = ("easy", "medium", "hard")
# Families of each level (the suites' own LEVEL tables); short reports and haystacks so a
# small model's context holds them: the easiest setting each suite has.
BY_FAMILY = {
    "finance": ({"easy": "lookup", "medium": "growth,margin,ratio,xref",
                 "hard": "cagr,aggregate,inconsistency"}, ["tokens=1000"]),
    "longctx": ({"easy": "needle,babi", "medium": "multikey,multivalue,nolex,aggregate",
                 "hard": "vartrack,code_exec,code_callers"}, ["tokens=1000", "mode=instruction"]),
    "terminal-tools": ({"easy": "sqlite-report,jq-select,openssl-decrypt",
                        "medium": "make-build", "hard": "git-commits,tar-repack"}, []),
}


def _copy_level(src_tasks, out: Path, per_level: int) -> None:
    """Copy up to per_level tasks of each level from already generated tasks into out."""
    taken = {lv: 0 for lv in LEVELS}
    for t in sorted(src_tasks, key=lambda t: t.id):
        lv = str(t.config.metadata.get("difficulty"))
        if lv in taken and taken[lv] < per_level:
            shutil.copytree(t.path, out / t.id)
            taken[lv] += 1


def build_suite(suite: str, out: Path, per_level: int, model: Path, code_tasks: Path | None) -> None:
    """Write per_level tasks of each difficulty level of `suite` into out."""
    if suite in BY_FAMILY:
        families, knobs = BY_FAMILY[suite]
        if suite == "longctx":
            knobs = [*knobs, f"tokenizer={model}"]
        for lv in LEVELS:
            generate(suite, out, per_level, seed=7, split=f"{suite[:3]}-{lv}",
                     knobs=[*knobs, f"families={families[lv]}"])
    elif suite == "cad":            # the level follows the drawn features: draw more, keep some
        pool = out.parent / "cad-pool"
        generate("cad", pool, per_level * 5, seed=7, split="cad", knobs=["max_features=3"])
        _copy_level(load_tasks(pool), out, per_level)
    else:                           # code: pick from a generated suite
        if code_tasks is None:
            code_tasks = out.parent / "code-pool"
            generate("code", code_tasks, per_level * 4, seed=0, split="code")
        _copy_level(load_tasks(code_tasks), out, per_level)


def action_kinds(job: Path) -> dict[str, int]:
    """How the model's turns parsed (bash, submit, malformed, unterminated), over the job."""
    kinds: dict[str, int] = {}
    for p in job.glob("*/agent/trajectory.json"):
        for turn in json.loads(p.read_text()).get("turns", []):
            kinds[turn.get("kind", "?")] = kinds.get(turn.get("kind", "?"), 0) + 1
    return dict(sorted(kinds.items()))


def run_suite(suite: str, tasks: Path, args) -> dict:
    settings = dict(temperature=0.7, seed=0, max_turns=args.max_turns,
                    max_reply_tokens=args.max_reply_tokens)
    req = EvalRequest(str(tasks), str(args.model), args.k, args.jobs, job=f"levels-{suite}",
                      jobs_dir=str(args.work / "jobs"), settings=settings)
    t0 = time.perf_counter()
    path, summary = evaluate(req)
    dom = summary["per_domain"].get(suite, {})
    return {"suite": suite, "job": str(path), "seconds": round(time.perf_counter() - t0, 1),
            "mean": dom.get("mean"), "ci": [dom.get("ci_low"), dom.get("ci_high")],
            "n_tasks": dom.get("n_tasks"), "k": args.k, "counts": summary.get("counts"),
            "by_difficulty": dom.get("by_difficulty", {}), "turns": action_kinds(path)}


def print_row(row: dict) -> None:
    for lv in LEVELS:
        d = row["by_difficulty"].get(lv)
        if d:
            print(f"{row['suite']:15} {lv:7} {d['n_tasks']:3d} x {row['k']}  {d['mean']:.3f} "
                  f"[{d['ci_low']:.3f}, {d['ci_high']:.3f}]", flush=True)
    print(f"{row['suite']:15} {'all':7} {row['n_tasks'] or 0:3d} x {row['k']}  "
          f"{row['mean'] or 0:.3f}  turns {row['turns']}  {row['seconds']} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=Path.home() / ".cache/posttrain/models/smollm2-135m-instruct")
    ap.add_argument("--code-tasks", type=Path)
    ap.add_argument("--suites", default="finance,longctx,terminal-tools,cad,code")
    ap.add_argument("--per-level", type=int, default=10)
    ap.add_argument("-k", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--max-turns", type=int, default=3)
    ap.add_argument("--max-reply-tokens", type=int, default=64)
    ap.add_argument("--work", type=Path, default=Path("runs/domain-eval"))
    add_args(ap, "2 tasks per level, k=1, finance only")
    args = ap.parse_args()
    if args.quick:
        args.per_level, args.k, args.suites = 2, 1, "finance"
    rows = []
    for suite in args.suites.split(","):
        tasks = args.work / "tasks" / suite
        if not tasks.is_dir():
            build_suite(suite, tasks, args.per_level, args.model, args.code_tasks)
        rows.append(run_suite(suite, tasks, args))
        print_row(rows[-1])
        # rewritten after every suite, so a stopped run keeps what it measured
        write_json(args.json, {"rows": rows, "model": str(args.model), "per_level": args.per_level, "k": args.k,
                               "max_turns": args.max_turns, "max_reply_tokens": args.max_reply_tokens,
                               "jobs": args.jobs, "loadavg_1m": os.getloadavg()[0], "quick": args.quick})


if __name__ == "__main__":
    main()
