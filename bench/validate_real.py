"""Precision of `posttrain validate` on real Terminal-Bench 1 tasks, against a hand review.

    POSTTRAIN_REAL_TASKS=DIR flock /tmp/bench.lock nice -n 19 python bench/validate_real.py \
        [--tasks DIR] [--only a,b,...] [--json PATH]

DIR holds TB1 task directories copied from a public repository (how: bench/parts/real_tasks.py);
nothing of them is committed. Each is imported (`posttrain tasks import-tb1`) and localized
into DIR/.posttrain/harbor, then validated under the docker backend (2 oracle runs, up to 8
mutants); finished checks are kept in DIR/.posttrain, so a rerun (or batches given with --only)
resumes. Tasks whose image does not build here (network beyond the package registries) or
whose oracle fails are counted and left out. Every weak-verifier or hackable flag on the rest
is looked up in bench/data/validate_real_review.csv (task, flag, verdict, why: one hand review
of the task's instruction, tests and evidence), and flag_precision = true flags / reviewed flags.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

from parts.real_tasks import ENV, base_map, imported, sources
from parts.report import cpu, write_json

from posttrain.validate.config import ValidateConfig
from posttrain.validate.html import write_html
from posttrain.validate.manifest import manifest_dict, write_manifest
from posttrain.validate.runner import validate_dirs

REVIEW = Path(__file__).parent / "data" / "validate_real_review.csv"
FLAGS = ("weak-verifier", "hackable")
LOCAL_BASE = os.environ.get("POSTTRAIN_DOCKER_IMAGE", "posttrain/bookworm:latest")


def outcome(report) -> str:
    """usable (the oracle passes), build_failed, oracle_failed, or other (broken before)."""
    oracle = report.checks.get("oracle")
    if oracle is not None and oracle.passed:
        return "usable"
    if "docker build of" in " ".join(report.reasons):
        return "build_failed"
    return "oracle_failed" if oracle is not None and oracle.passed is False else "other"


def flags_of(report) -> list[str]:
    return sorted({c.flags for c in report.checks.values() if c.passed is False and c.flags in FLAGS})


def read_review() -> dict[tuple[str, str], dict]:
    with open(REVIEW, newline="", encoding="utf-8") as f:
        return {(r["task"], r["flag"]): r for r in csv.DictReader(f)}


def mutant_counts(usable: list) -> dict:
    """Mutants run and killed over the usable tasks (their mutation checks' evidence)."""
    runs = [c.evidence for r in usable if (c := r.checks.get("mutation")) is not None and c.evidence]
    return {"mutants": sum(e.get("mutants", 0) for e in runs), "mutants_killed": sum(e.get("killed", 0) for e in runs)}


def summarize(reports: list, review: dict) -> dict:
    kinds = {r.id: outcome(r) for r in reports}
    usable = [r for r in reports if kinds[r.id] == "usable"]
    flagged = [(r.id, f) for r in usable for f in flags_of(r)]
    verdicts = {k: review[k]["verdict"] for k in flagged if k in review}
    true = sum(v == "true" for v in verdicts.values())
    return {"tasks_tried": len(reports), "real_tasks": len(usable),
            "skipped": {k: sum(v == k for v in kinds.values()) for k in
                        ("build_failed", "oracle_failed", "other")},
            "statuses": {s: sum(r.status == s for r in usable) for s in
                         sorted({r.status for r in usable})},
            **mutant_counts(usable),
            "flags": len(flagged), "reviewed": len(verdicts), "true_flags": true,
            "flag_precision": round(true / len(verdicts), 3) if verdicts else None,
            "unreviewed": [f"{t}:{f}" for t, f in flagged if (t, f) not in review],
            "flagged": [{"task": t, "flag": f, "verdict": verdicts.get((t, f))} for t, f in flagged],
            "left_out": {r.id: kinds[r.id] for r in reports if kinds[r.id] != "usable"}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=Path, default=os.environ.get(ENV), help=f"cache dir (or ${ENV})")
    ap.add_argument("--only", help="comma-separated task names (a batch; the state is kept)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path, metavar="PATH")
    a = ap.parse_args()
    if a.tasks is None or not Path(a.tasks).is_dir():
        sys.exit(f"no real tasks: set {ENV} or --tasks to a directory of Terminal-Bench 1 tasks "
                 "(how to fill it: bench/parts/real_tasks.py)")
    os.environ.setdefault("POSTTRAIN_DOCKER_BASE_MAP", base_map(LOCAL_BASE))
    os.environ.setdefault("POSTTRAIN_DOCKER_PASS_PROXY", "1")
    work = Path(a.tasks) / ".posttrain"
    srcs = sources(Path(a.tasks), a.only.split(",") if a.only else None)
    paths = [imported(s, work / "harbor") for s in srcs]
    cfg = ValidateConfig(oracle_runs=2, determinism_runs=1, backend="docker")
    reports = list(validate_dirs(paths, cfg, work / "validation.checks", a.jobs))
    manifest = manifest_dict(reports, cfg.model_dump())
    write_manifest(work / "validation.json", manifest)
    write_html(manifest, work / "validation.html")
    result = {"cpu": cpu(), "source": str(a.tasks), "config": cfg.model_dump(),
              **summarize(reports, read_review())}
    print({k: result[k] for k in ("tasks_tried", "real_tasks", "skipped", "flags", "reviewed",
                                  "flag_precision", "unreviewed")}, flush=True)
    write_json(a.json, result)


if __name__ == "__main__":
    main()
