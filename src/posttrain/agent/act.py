"""One reply's actions, run in order: each runnable one past the approval gate (agent/approval.py)
and into the sandbox, timed as a tool Step; the turn is recorded and the observation returned.
A reviewer's wait is given back to the agent's clock; a fault that outlives its retries ends the
episode as infra_error."""

from __future__ import annotations

import json
import time

from posttrain.agent.approval import ApprovalRequest, Decision, Gate, denied_observation
from posttrain.agent.config import AgentConfig
from posttrain.agent.live import Live, fail, retried
from posttrain.agent.protocol import Action
from posttrain.agent.retry import EpisodeFault
from posttrain.types import PARSE_FAILURES, ExecResult, Step, Turn


def _exec(live: Live, action: Action, timeout_s: float, cfg: AgentConfig):
    """The action's ExecResult (its failure is an observation), timed as a tool Step."""
    t0 = time.time()
    result = retried(lambda: live.harness.run(action, live.sandbox, timeout_s), "sandbox",
                      [live], cfg)
    live.episode.steps.append(Step("tool", len(live.episode.turns), t0, time.time() - t0, {
        "exit_code": result.exit_code, "timed_out": result.timed_out, "killed_by": result.killed_by,
        **({"tool": action.name} if action.kind == "tool" else {})}))
    return result


def _review(live: Live, command: str, gate: Gate) -> Decision | None:
    """None if the gate's policy lets the command through; else the reviewer's verdict, its wait
    timed as an approval Step and given back to the agent's clock (a person's time is not its)."""
    rule = gate.policy.rule_for(command)
    if rule is None:
        return None
    ep = live.episode
    request = ApprovalRequest(ep.task_id, ep.group_id, live.slot, len(ep.turns), command, rule)
    t0, p0 = time.time(), time.perf_counter()
    decision = gate.approver.decide(request)
    waited = time.perf_counter() - p0
    live.started += waited
    ep.timings["approval_wait_s"] = ep.timings.get("approval_wait_s", 0.0) + waited
    ep.steps.append(Step("approval", request.turn, t0, waited, {
        "allow": decision.allow, "reason": decision.reason, "by": decision.by, "rule": rule}))
    return decision


def _described(action: Action) -> str:
    """What a reviewer and the trajectory see of a runnable action."""
    return action.command or f"{action.name} {json.dumps(action.args)}"


def _run_one(live: Live, action: Action, cfg: AgentConfig,
             gate: Gate | None) -> tuple[str, ExecResult | None]:
    """One runnable action's observation and result (None: a reviewer denied it)."""
    if gate is not None and (verdict := _review(live, _described(action), gate)) \
            and not verdict.allow:
        return denied_observation(verdict), None
    left = float(live.task.config.agent.timeout_sec) - (time.perf_counter() - live.started)
    result = _exec(live, action, max(0.1, min(cfg.command_timeout_s, left)), cfg)
    live.episode.timings["exec_s"] = live.episode.timings.get("exec_s", 0.0) + result.duration_s
    return live.policy.observation(result, cfg.observation_budget), result


def act(live: Live, text: str, actions: list[Action], cfg: AgentConfig,
         gate: Gate | None) -> str | None:
    """Run the reply's actions in order; return the observation (the failures' hints and the
    outputs, one per line), or None if the episode is over (submitted, failed, out of time)."""
    failures = [a.kind for a in actions if a.kind in PARSE_FAILURES]
    parts, kind, described, ran = [], "", "", None
    for action in actions:
        if action.kind == "submit":
            live.episode.turns.append(Turn(described or text, "submit", "\n".join(parts), ran,
                                           failures))
            return None
        if action.kind in PARSE_FAILURES:
            parts.append(action.hint)
            continue
        try:
            obs, result = _run_one(live, action, cfg, gate)
        except EpisodeFault as e:
            fail(live, e)
            return None
        parts.append(obs)
        if result is not None and kind in ("", "denied"):
            kind, described, ran = action.kind, _described(action), result
        elif not kind:
            kind, described = "denied", _described(action)
    obs = "\n".join(parts)
    live.episode.turns.append(Turn(described or text, kind or failures[0], obs, ran, failures))
    if time.perf_counter() - live.started >= float(live.task.config.agent.timeout_sec):
        live.episode.status = "agent_timeout"
        return None
    return obs

