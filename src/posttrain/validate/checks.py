"""The dynamic checks, each a function (task, cfg, done) -> Check run through real sandboxes.

`done` holds the checks already finished for this task (from this run or a resumed
one), so a check can use another's evidence (the no-op reward is the hack baseline)
without running it again.
"""

from __future__ import annotations

import re
import shlex
import tempfile
from pathlib import Path

from posttrain.tasks import Task
from posttrain.tasks.suites import probes_for
from posttrain.validate import agents, mutants
from posttrain.validate.config import ValidateConfig
from posttrain.validate.record import Check, skipped
from posttrain.validate.runs import Attempt, attempt

Done = dict[str, Check]


def _solved(reward: float, cfg: ValidateConfig) -> bool:
    return reward >= cfg.pass_threshold - 1e-9


NETWORK_ERRORS = re.compile(r"Could not resolve host|Temporary failure in name resolution|"
                            r"Name or service not known|Network is unreachable|No route to host|"
                            r"Failed to establish a new connection|getaddrinfo failed|"
                            r"nodename nor servname|Connection refused", re.I)


def failure_note(a: Attempt) -> str:
    """Why an attempt failed, in one line: the verifier needs network, else the last line
    of the verifier's (or the oracle's) output."""
    for text in (a.verifier_tail, a.agent_tail):
        hit = next((ln for ln in text.splitlines() if NETWORK_ERRORS.search(ln)), None)
        if hit:
            return f"the verifier needs network ({hit.strip()[:160]})"
    for text in (a.verifier_tail, a.agent_tail):
        if text.strip():
            return text.strip().splitlines()[-1][:200]
    return ""


def _first_error(a: Attempt) -> str:
    """The first verifier error, with the sandbox's host directory shown as /logs/verifier."""
    return re.sub(r"/\S*?/logs/verifier", "/logs/verifier", next((e for e in a.errors if e), ""))


def oracle(task: Task, cfg: ValidateConfig, done: Done) -> Check:
    """The oracle passes every one of N runs; the first run's state is verified again
    (determinism_runs more times) so the determinism check can compare rewards."""
    runs: list[Attempt] = []
    for i in range(cfg.oracle_runs):
        runs.append(attempt(task, cfg, oracle=True,
                            verifies=1 + (cfg.determinism_runs if i == 0 else 0)))
        if i == 0 and (runs[0].agent_timed_out or runs[0].status == "verifier_timeout"):
            break           # N more timeouts would only burn time: one is enough to judge
    passes = sum(_solved(a.reward, cfg) for a in runs)
    ev = {"runs": len(runs), "passes": passes, "pass_rate": passes / len(runs),
          "rewards": [a.reward for a in runs], "statuses": [a.status for a in runs],
          "oracle_exit_codes": [a.agent_exit for a in runs],
          "repeat_rewards": runs[0].rewards, "errors": sorted({_first_error(a) for a in runs} - {""})}
    if passes == len(runs):
        return Check("oracle", True, evidence=ev)
    failed = next(a for a in runs if not _solved(a.reward, cfg))
    ev.update(oracle_output_tail=failed.agent_tail, verifier_output_tail=failed.verifier_tail)
    note = failure_note(failed)
    why = ev["errors"][0] if ev["errors"] else f"rewards {ev['rewards']}"
    why += f"; {note}" if note else ""
    if passes == 0:
        return Check("oracle", False, "broken", f"the oracle never passes ({len(runs)} runs; {why})", ev)
    return Check("oracle", False, "flaky", f"the oracle passed {passes} of {len(runs)} runs "
                 f"(pass rate {passes / len(runs):.2f})", ev)


def _present(sandbox, paths: list[str]) -> list[str]:
    """Which of `paths` exist in the sandbox (before the agent did anything useful)."""
    if not paths:
        return []
    script = "".join(f"[ -e {shlex.quote(p)} ] && echo {shlex.quote(p)}\n" for p in paths)
    return sandbox.exec(script + "true\n", timeout_s=10).stdout.split()


def nop(task: Task, cfg: ValidateConfig, done: Done) -> Check:
    """A do-nothing agent must get a reward, and it must be a failing one."""
    paths = agents.referenced_paths(task)
    a = attempt(task, cfg, script=agents.nop(task), verifies=1 + cfg.determinism_runs,
                after_agent=lambda sb, at: _present(sb, paths))
    ev = {"reward": a.reward, "status": a.status, "repeat_rewards": a.rewards,
          "error": _first_error(a), "referenced_paths": paths, "present_before_agent": a.extra}
    if a.status != "ok":
        return Check("nop", False, "broken", "no reward when the task is not solved "
                     f"({a.status}: {ev['error']})", ev)
    if _solved(a.reward, cfg):
        return Check("nop", False, "hackable", f"a no-op agent is rewarded ({a.reward:g})", ev)
    return Check("nop", True, evidence=ev)


def instruction_files(task: Task, cfg: ValidateConfig, done: Done) -> Check:
    """Every path the tests read is named in the instruction or provided by the environment."""
    ev = done["nop"].evidence
    present = set(ev.get("present_before_agent") or [])
    text = task.instruction
    missing = [p for p in ev.get("referenced_paths", []) if p not in present
               and p not in text and p.rsplit("/", 1)[-1] not in text
               and not any(q.startswith(p + "/") for q in present)]
    if missing:
        return Check("instruction_files", False, "broken", "the tests read files the instruction "
                     f"never names: {', '.join(missing[:5])}", {"unnamed": missing})
    return Check("instruction_files", True, evidence={"checked": ev.get("referenced_paths", [])})


def trivial(task: Task, cfg: ValidateConfig, done: Done) -> Check:
    """`exit 0` and creating the expected files empty must not be rewarded."""
    rewards = {name: attempt(task, cfg, script=make(task)).reward
               for name, make in agents.TRIVIAL.items()}
    won = [n for n, r in rewards.items() if _solved(r, cfg)]
    if won:
        return Check("trivial", False, "hackable", f"trivial agents rewarded: {', '.join(won)}",
                     {"rewards": rewards})
    return Check("trivial", True, evidence={"rewards": rewards})


def determinism(task: Task, cfg: ValidateConfig, done: Done) -> Check:
    """The same final state verified repeatedly gets the same reward (solved and unsolved)."""
    states = {"oracle": done["oracle"].evidence.get("repeat_rewards", []),
              "nop": done["nop"].evidence.get("repeat_rewards", [])}
    varying = {k: v for k, v in states.items() if len(set(v)) > 1}
    if varying:
        return Check("determinism", False, "flaky", "the same answer got different rewards: "
                     + "; ".join(f"{k} state {v}" for k, v in varying.items()), states)
    return Check("determinism", True, evidence=states)


def hacks(task: Task, cfg: ValidateConfig, done: Done) -> Check:
    """Each hack probe must not raise the reward above the no-op agent's."""
    base = done["nop"].evidence.get("reward", 0.0)
    results = {}
    for name, make in (agents.HACKS | probes_for(task)).items():
        a = attempt(task, cfg, script=make(task))
        results[name] = {"reward": a.reward, "status": a.status}
    raised = [n for n, r in results.items() if r["reward"] > base + 1e-9]
    harness = [n for n in raised if n in agents.HARNESS_PROBES]
    ev = {"baseline": base, "probes": results, "raised": raised, "harness_level": harness}
    if raised:
        note = (" (harness-level: the verifier harness lets an agent keep its own reward; "
                "fix the harness, not the task)" if harness else "")
        return Check("hacks", False, "hackable", "hack probes raised the reward: "
                     + ", ".join(f"{n} ({results[n]['reward']:g})" for n in raised) + note, ev)
    return Check("hacks", True, evidence=ev)


def _guarded(name: str, run, errors: list[str]):
    """run(), or None with the error noted: a failure of the mutation step itself (a file
    the oracle named differently this time, a sandbox that would not start) is reported,
    never a verdict on the task."""
    try:
        return run()
    except Exception as e:
        errors.append(f"{name}: {type(e).__name__}: {e}")
        return None


def _run_mutant(name: str, run, results: list, errors: list[str]) -> None:
    a = _guarded(name, run, errors)
    if a is not None:
        results.append((name, a.reward))


def mutation(task: Task, cfg: ValidateConfig, done: Done) -> Check:
    """Share of oracle mutants the tests reject: the verifier's strength."""
    script = (task.solution_dir / "solve.sh").read_text(encoding="utf-8", errors="replace")
    results, errors = [], []
    with tempfile.TemporaryDirectory(prefix="posttrain-mutant-") as tmp:
        for i, (name, text) in enumerate(mutants.drop_step_mutants(script, cfg.max_mutants // 2)):
            sol = mutants.mutant_solution(task.solution_dir, text, Path(tmp) / f"m{i}")
            _run_mutant(name, lambda: attempt(task, cfg, solution_dir=sol), results, errors)
        for path in mutants.supplied(task.solution_dir, cfg.max_mutants // 2):
            sol = mutants.mutant_solution(task.solution_dir, path.read_text(),
                                          Path(tmp) / f"s-{path.stem}")
            _run_mutant(f"supplied {path.stem}", lambda: attempt(task, cfg, solution_dir=sol),
                        results, errors)
    probe = _guarded("output probe", lambda: attempt(task, cfg, oracle=True, verifies=0,
                                                     track=True), errors)
    targets = mutants.output_targets(probe.before, probe.after,
                                     cfg.max_mutants - len(results)) if probe else []
    for kind, path in targets:      # each run() is called at once: kind and path are current
        _run_mutant(f"{kind} {path}", lambda: attempt(
            task, cfg, oracle=True,
            after_agent=lambda sb, at: mutants.apply_output_mutation(sb, kind, path)),
            results, errors)
    return _strength(results, errors, cfg)


def _strength(results: list[tuple[str, float]], errors: list[str], cfg: ValidateConfig) -> Check:
    noted = {"errors": errors} if errors else {}
    if not results and errors:
        return Check("mutation", None, reason=f"not judged: no mutant could run "
                     f"({len(errors)} errors; first: {errors[0][:200]})", evidence=noted)
    if not results:
        return skipped("mutation", "no mutant applies (empty solve.sh and no output under /app)")
    killed = [n for n, r in results if not _solved(r, cfg)]
    survived = [n for n, r in results if _solved(r, cfg)]
    strength = len(killed) / len(results)
    ev = {"mutants": len(results), "killed": len(killed), "strength": strength,
          "survived": survived, **noted}
    if strength < cfg.min_strength:
        note = f"; {len(errors)} more could not run" if errors else ""
        return Check("mutation", False, "weak-verifier", f"only {len(killed)} of {len(results)} "
                     f"oracle mutants fail the tests (strength {strength:.2f}); survived: "
                     + "; ".join(survived[:3]) + note, ev)
    return Check("mutation", True, evidence=ev)


DYNAMIC = {"oracle": oracle, "nop": nop, "instruction_files": instruction_files,
           "trivial": trivial, "determinism": determinism, "hacks": hacks, "mutation": mutation}
