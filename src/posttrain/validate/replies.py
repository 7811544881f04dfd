"""The dynamic checks of a single-turn task (metadata.kind = "single-turn"): replies scored on
the host by the domain's scorer, no sandbox. The same names as checks.DYNAMIC, so the runner,
the store and the report treat both alike.

oracle: solution/reply.md is solved, `oracle_runs` times. nop: the empty reply is not solved.
trivial: replies that ignore the instruction ("OK.", and the domain's TRIVIAL, e.g. the request
answered plainly) are not solved. determinism: the same reply gets the same reward each time.
hacks: the instruction echoed and the domain's probes (tasks.suites.probes_for) are not solved,
and none gets more than HACK_CEILING of the reward.
"""

from __future__ import annotations

from posttrain.tasks import Task
from posttrain.tasks.suites import probes_for, probes_module, score_reply
from posttrain.validate.checks import determinism, trivial_verdict  # determinism: repeat rewards only
from posttrain.validate.config import ValidateConfig
from posttrain.validate.record import Check

Done = dict[str, Check]
HACK_CEILING = 0.5
TRIVIAL = {"ok": lambda task: "OK."}
HACKS = {"echo_instruction": lambda task: task.instruction}


def _reward(task: Task, reply: str) -> float:
    return score_reply(task.config.metadata, reply)[0]



def oracle(task: Task, cfg: ValidateConfig, done: Done) -> Check:
    reply = task.oracle_reply()
    rewards = [_reward(task, reply) for _ in range(cfg.oracle_runs)]
    ev = {"runs": len(rewards), "rewards": rewards, "repeat_rewards": rewards[:1 + cfg.determinism_runs]}
    passes = sum(cfg.solved(r) for r in rewards)
    if passes == len(rewards):
        return Check("oracle", True, evidence=ev)
    flags = "broken" if passes == 0 else "flaky"
    return Check("oracle", False, flags, f"the oracle reply scores {rewards[0]:g}", ev)


def nop(task: Task, cfg: ValidateConfig, done: Done) -> Check:
    rewards = [_reward(task, "") for _ in range(1 + cfg.determinism_runs)]
    ev = {"reward": rewards[0], "status": "ok", "repeat_rewards": rewards}
    if cfg.solved(rewards[0]):
        return Check("nop", False, "hackable", f"the empty reply is rewarded ({rewards[0]:g})", ev)
    return Check("nop", True, evidence=ev)


def trivial(task: Task, cfg: ValidateConfig, done: Done) -> Check:
    domain = getattr(probes_module(task.domain), "TRIVIAL", {})
    rewards = {name: _reward(task, make(task)) for name, make in (TRIVIAL | domain).items()}
    return trivial_verdict(rewards, cfg, "replies")


def hacks(task: Task, cfg: ValidateConfig, done: Done) -> Check:
    results = {name: {"reward": _reward(task, make(task)), "status": "ok"}
               for name, make in (HACKS | probes_for(task)).items()}
    raised = [n for n, r in results.items()
              if cfg.solved(r["reward"]) or r["reward"] > HACK_CEILING + 1e-9]
    ev = {"ceiling": HACK_CEILING, "probes": results, "raised": raised}
    if raised:
        return Check("hacks", False, "hackable", "hack replies scored high: "
                     + ", ".join(f"{n} ({results[n]['reward']:g})" for n in raised), ev)
    return Check("hacks", True, evidence=ev)


CHECKS = {"oracle": oracle, "nop": nop, "trivial": trivial, "determinism": determinism, "hacks": hacks}
