"""The dynamic checks, each a function (task, cfg, done) -> Check run through real sandboxes.

`done` holds the checks already finished for this task (from this run or a resumed
one), so a check can use another's evidence (the no-op reward is the hack baseline)
without running it again.
"""

from __future__ import annotations

import re
import shlex

from posttrain.tasks import Task
from posttrain.tasks.suites import probes_for
from posttrain.validate import agents
from posttrain.validate.config import ValidateConfig
from posttrain.validate.mutation import mutation
from posttrain.validate.record import Check
from posttrain.validate.runs import Attempt, attempt
from posttrain.validate.verifier_paths import referenced_paths

Done = dict[str, Check]

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
    passes = sum(cfg.solved(a.reward) for a in runs)
    ev = {"runs": len(runs), "passes": passes, "pass_rate": passes / len(runs),
          "rewards": [a.reward for a in runs], "statuses": [a.status for a in runs],
          "oracle_exit_codes": [a.agent_exit for a in runs],
          "repeat_rewards": runs[0].rewards, "errors": sorted({_first_error(a) for a in runs} - {""})}
    if passes == len(runs):
        return Check("oracle", True, evidence=ev)
    failed = next(a for a in runs if not cfg.solved(a.reward))
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
    paths = referenced_paths(task)
    a = attempt(task, cfg, script=agents.nop(task), verifies=1 + cfg.determinism_runs,
                after_agent=lambda sb, at: _present(sb, paths))
    ev = {"reward": a.reward, "status": a.status, "repeat_rewards": a.rewards,
          "error": _first_error(a), "referenced_paths": paths, "present_before_agent": a.extra}
    if a.status != "ok":
        return Check("nop", False, "broken", "no reward when the task is not solved "
                     f"({a.status}: {ev['error']})", ev)
    if cfg.solved(a.reward):
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
    return trivial_verdict(rewards, cfg, "agents")


def trivial_verdict(rewards: dict[str, float], cfg: ValidateConfig, what: str) -> Check:
    """The `trivial` check from each trivial agent's (or reply's) reward: none may be solved."""
    won = [n for n, r in rewards.items() if cfg.solved(r)]
    if won:
        return Check("trivial", False, "hackable", f"trivial {what} rewarded: {', '.join(won)}",
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


DYNAMIC = {"oracle": oracle, "nop": nop, "instruction_files": instruction_files,
           "trivial": trivial, "determinism": determinism, "hacks": hacks, "mutation": mutation}
