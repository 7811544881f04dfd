"""The mutation check: share of wrong solutions the tests reject, the verifier's strength.

Wrong solutions come from, in order: the task's supplied mutants (solution/mutants/), then
mutants of the deliverables (validate/deliverables.py) found by a probe run of the oracle;
a task with no deliverable file (the tests query a service, or state outside /app and
/tmp) gets mutants of the oracle's commands instead (validate/mutants.py). At most
`max_mutants` (--mutation-budget) run per task.

A surviving mutant is evidence of a weak verifier only when it changes a deliverable:
supplied and deliverable mutants do by construction; a surviving command mutant of a task
without deliverables is reported but not counted (dropping an `echo` line survives any
verifier). `weak-verifier` needs counted mutants with strength below min_strength.
"""

from __future__ import annotations

import difflib
import tempfile
from pathlib import Path

from posttrain.tasks import Task
from posttrain.validate import agents, deliverables, mutants
from posttrain.validate.config import ValidateConfig
from posttrain.validate.record import Check, skipped
from posttrain.validate.runs import Attempt, attempt, changed_files
from posttrain.validate.verifier_paths import referenced_paths

NOT_A_DELIVERABLE = ("changes no deliverable: the verifier read no file the oracle produced, "
                     "so the tests may check a service or state outside /app and /tmp")


def _guarded(name: str, run, errors: list[str]):
    """run(), or None with the error noted: a failure of the mutation step itself (a file
    the oracle named differently this time, a sandbox that would not start) is reported,
    never a verdict on the task."""
    try:
        return run()
    except deliverables.NoChange:
        return None
    except Exception as e:
        errors.append(f"{name}: {type(e).__name__}: {e}")
        return None


def _run(name: str, run, cfg: ValidateConfig, errors: list[str], counts: bool, why: str,
         evidence: dict | None = None) -> list[dict]:
    a = _guarded(name, run, errors)
    if a is None:
        return []
    ev = evidence if evidence is not None else (a.extra if isinstance(a.extra, dict) else {})
    return [{"name": name, "reward": a.reward, "killed": not cfg.solved(a.reward),
             "counts": counts, "why": why, **ev}]


def _script_diff(old: str, new: str, name: str) -> str:
    return "\n".join(difflib.unified_diff(old.splitlines(), new.splitlines(), "solve.sh",
                                          name, n=1, lineterm=""))


def _supplied(task: Task, cfg: ValidateConfig, script: str, tmp: Path, limit: int,
              errors: list[str]) -> list[dict]:
    out = []
    for path in mutants.supplied(task.solution_dir, limit):
        text = path.read_text()
        sol = mutants.mutant_solution(task.solution_dir, text, tmp / f"s-{path.stem}")
        why = f"a wrong solution the task ships (solution/mutants/{path.name}): it must fail"
        out += _run(f"supplied {path.stem}", lambda: attempt(task, cfg, solution_dir=sol), cfg,
                    errors, True, why, {"diff": _script_diff(script, text, path.name)})
    return out


def _commands(task: Task, cfg: ValidateConfig, script: str, tmp: Path, limit: int,
              errors: list[str]) -> list[dict]:
    out = []
    for i, (name, text) in enumerate(mutants.drop_step_mutants(script, limit)):
        sol = mutants.mutant_solution(task.solution_dir, text, tmp / f"m{i}")
        out += _run(name, lambda: attempt(task, cfg, solution_dir=sol), cfg, errors, False,
                    NOT_A_DELIVERABLE, {"diff": _script_diff(script, text, "mutant")})
    return out


def _of_deliverables(task: Task, cfg: ValidateConfig, found: list[str], probe: Attempt,
                     limit: int, errors: list[str], trace: str) -> list[dict]:
    out = []
    for kind, path in deliverables.plan(found, probe.before, limit):
        t = deliverables.Target(kind, path, task.instruction)
        verb = "changed" if path in probe.before else "created"
        why = f"the oracle {verb} {path} and the verifier reads it ({trace})"
        out += _run(t.name, lambda: attempt(task, cfg, oracle=True, before_agent=t.before,
                                            after_agent=t.after), cfg, errors, True, why)
    return out


def _deliverables(task: Task, probe: Attempt) -> tuple[list[str], str]:
    """(deliverables, how the verifier's reads were found): the atime trace, else (a mount
    that keeps no atimes) the changed files the tests name."""
    if probe.reads is not None:
        return deliverables.find(probe.before, probe.after, probe.reads), "atime trace"
    named = referenced_paths(task)
    hit = [p for p in changed_files(probe.before, probe.after) if not deliverables.INERT_GIT.search(p)
           and any(p == q or p.startswith(q + "/") for q in named)]
    return hit, "named in the tests (no atime trace on this mount)"


def mutation(task: Task, cfg: ValidateConfig, done: dict) -> Check:
    if cfg.max_mutants == 0:
        return skipped("mutation", "mutation budget is 0")
    script = (task.solution_dir / "solve.sh").read_text(encoding="utf-8", errors="replace")
    errors: list[str] = []
    with tempfile.TemporaryDirectory(prefix="posttrain-mutant-") as tmp:
        results = _supplied(task, cfg, script, Path(tmp), cfg.max_mutants // 2, errors)
        probe = _guarded("output probe", lambda: attempt(task, cfg, oracle=True, track=True,
                                                         trace=True), errors)
        found, trace = _deliverables(task, probe) if probe else ([], "no probe run")
        left = cfg.max_mutants - len(results)
        if found:
            results += _of_deliverables(task, cfg, found, probe, left, errors, trace)
        else:
            results += _commands(task, cfg, script, Path(tmp), left, errors)
    context = {"deliverables": found, "trace": trace, "mode": "deliverables" if found else "commands"}
    return strength(results, errors, cfg, context)


def strength(results: list[dict], errors: list[str], cfg: ValidateConfig, context: dict) -> Check:
    """Judge the verifier from the counted mutants (killed ones always count)."""
    noted = {"errors": errors} if errors else {}
    if not results and errors:
        return Check("mutation", None, reason=f"not judged: no mutant could run "
                     f"({len(errors)} errors; first: {errors[0][:200]})",
                     evidence={**context, **noted})
    counted = [r for r in results if r["killed"] or r["counts"]]
    if not counted:
        why = ("no mutant applies (empty solve.sh and no deliverable)" if not results else
               f"{len(results)} command mutants survived, none changes a deliverable")
        return Check("mutation", None, reason=why, evidence={**context, "results": _brief(results)})
    survivors = [r for r in counted if not r["killed"]]
    value = 1 - len(survivors) / len(counted)
    ev = {**context, "mutants": len(counted), "killed": len(counted) - len(survivors),
          "strength": value, "survived": [r["name"] for r in survivors], "survivors": survivors,
          "results": _brief(results), **noted}
    if value < cfg.min_strength:
        note = f"; {len(errors)} more could not run" if errors else ""
        return Check("mutation", False, "weak-verifier", f"only {ev['killed']} of {len(counted)} "
                     f"mutants of deliverables fail the tests (strength {value:.2f}); survived: "
                     + "; ".join(f"{r['name']} ({r.get('how', r['why'])})" for r in survivors[:3])
                     + note, ev)
    return Check("mutation", True, evidence=ev)


def _brief(results: list[dict]) -> list[dict]:
    return [{k: r[k] for k in ("name", "reward", "killed", "counts")} for r in results]
