"""terminal-tools: no domain probes (the generic ones cover its verifiers), and scripted
partial agents that show its reward is all or nothing, as the formula says (every check)."""

from __future__ import annotations

from posttrain.tasks import Task


def all_but_last_step(task: Task) -> str:
    """The oracle's turns, the obstacle and its recovery included, without the last one."""
    steps = task.oracle_steps() or []
    return "cd /app\n" + "".join(f"{s}\n" for s in steps[:-1])


def obstacle_only(task: Task) -> str:
    """Only the first obvious command, the one that runs into the planted obstacle."""
    steps = task.oracle_steps() or []
    return "cd /app\n" + (f"{steps[0]}\n" if steps else "")


# Scripted partial agents (not probes): what they score shows how the reward grades.
PARTIAL = {"all_but_last_step": all_but_last_step, "obstacle_only": obstacle_only}

PROBES: dict = {}
