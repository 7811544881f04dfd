"""The tool-calling agent for OpenAI-compatible endpoints (eval's tools protocol): the task's
declared tools (tools.json) or `bash`, and `submit`, run through the same ToolHarness as RL's.

Each turn: one chat completion; every tool call in the reply is answered with a `tool`
message (command output, or an error for a malformed call). The agent phase ends on
`submit`, the turn limit, the agent timeout, a context overflow, an endpoint failure, or
MAX_MALFORMED_IN_A_ROW replies in a row with no usable tool call (a model_error). With a Gate
(agent/approval.py), a bash call its policy matches waits for a reviewer; a denied one is
answered with the denial, and the wait is added to the agent's deadline. With checkpoints
(agent/harness/toolcheckpoint.py), a trial killed midway goes on at its last completed turn.
A reply without structured `tool_calls` whose text holds `<tool_call>` blocks (Hermes objects or
SmolLM2's list) is read as those calls (what vLLM's hermes parser does server-side), so models
served without a tool-call parser can still act. Every call is checked as RL checks it
(agent/harness/calls.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from posttrain.agent.approval import ApprovalRequest, Gate, denied_observation
from posttrain.agent.harness.calls import check_call
from posttrain.agent.harness.chatclient import ChatClient, ContextOverflow, ModelError
from posttrain.agent.harness.toolcheckpoint import ToolCheckpoints
from posttrain.agent.harness.tools import ToolHarness
from posttrain.agent.protocol import Action, format_observation
from posttrain.sandbox import Sandbox
from posttrain.tasks.tools import BASH, ToolSet, task_tools
from posttrain.toolcalls import read_calls

SYSTEM_PROMPT = ("You are an autonomous agent in a Linux sandbox; your working directory is "
                 "/app. Use the bash tool to run shell commands, one per call, and read their "
                 "output. When the task is complete, call the submit tool.")
TOOLS_PROMPT = ("You are an autonomous agent. Act by calling the tools you are given, and read "
                "their results. When the task is complete, call the submit tool.")
NO_TOOL_HINT = "error: no tool call. Call a tool, or submit when done."
MAX_MALFORMED_IN_A_ROW = 3


def eval_harness(task, allowed: tuple[str, ...]) -> ToolHarness:
    """The task's declared tools, else `bash` where the conditions allow it; `submit` always."""
    declared = task_tools(task)
    tools = declared or (BASH if "bash" in allowed else ToolSet("", ()))
    return ToolHarness(tools, native=True)     # the endpoint renders the tools itself


@dataclass
class AgentRun:
    """The agent phase of one trial."""

    status: str = "ok"          # ok | agent_timeout | context_overflow | model_error
    error: str = ""
    messages: list[dict] = field(default_factory=list)
    turns: list[dict] = field(default_factory=list)  # per-turn metrics for the trajectory
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_s: float = 0.0
    sandbox_s: float = 0.0
    n_malformed: int = 0
    submitted: bool = False
    deadline: float = 0.0       # perf_counter; a reviewer's wait moves it on
    approvals: list[dict] = field(default_factory=list)  # each verdict, for the trajectory
    checkpoints: list[dict] = field(default_factory=list)  # each snapshot and restore, with its ms


@dataclass(frozen=True)
class AgentLimits:
    max_turns: int
    timeout_s: float
    command_timeout_s: float
    observation_budget: int
    sampling: dict  # temperature, top_p, max_tokens, seed


def run_agent(instruction: str, sandbox: Sandbox, client: ChatClient, limits: AgentLimits,
              harness: ToolHarness, gate: Gate | None = None, trial: tuple[str, int] = ("", 0),
              checkpoints: ToolCheckpoints | None = None) -> AgentRun:
    """The agent phase; `trial` (task id, attempt) names it to the gate's reviewer. With
    `checkpoints`, it goes on from the trial's last checkpoint and saves one after every turn."""
    system = SYSTEM_PROMPT if harness.tools.command == "" and "bash" in harness.specs else TOOLS_PROMPT
    run = AgentRun(messages=[{"role": "system", "content": system},
                             {"role": "user", "content": instruction}])
    specs = [{"type": "function", "function": s} for s in harness.specs.values()]
    run.deadline = time.perf_counter() + limits.timeout_s
    first, in_a_row = (0, 0) if checkpoints is None else checkpoints.resume(run, sandbox, limits.timeout_s)
    for turn in range(first, limits.max_turns):
        if time.perf_counter() >= run.deadline:
            run.status = "agent_timeout"
            break
        sampling = dict(limits.sampling, seed=_turn_seed(limits.sampling.get("seed"), turn))
        try:
            reply = client.chat(run.messages, specs, deadline=run.deadline, **sampling)
        except ContextOverflow as e:
            run.status, run.error = "context_overflow", str(e)
            break
        except ModelError as e:  # past the deadline it is the agent's time that ran out
            late = time.perf_counter() >= run.deadline
            run.status, run.error = ("agent_timeout" if late else "model_error"), str(e)
            break
        run.prompt_tokens += reply.prompt_tokens
        run.completion_tokens += reply.completion_tokens
        run.model_s += reply.latency_s
        review = None if gate is None else (gate, *trial, turn)
        usable = _answer(run, reply.message, sandbox, limits, harness, review)
        run.turns.append({"turn": turn, "latency_s": reply.latency_s, "retries": reply.retries,
                          "prompt_tokens": reply.prompt_tokens,
                          "completion_tokens": reply.completion_tokens,
                          "finish_reason": reply.finish_reason})
        in_a_row = 0 if usable else in_a_row + 1
        if run.submitted:
            break
        if checkpoints is not None:
            checkpoints.save(run, sandbox, turn + 1, in_a_row, limits.timeout_s)
        if in_a_row >= MAX_MALFORMED_IN_A_ROW:
            run.status = "model_error"
            run.error = f"{in_a_row} replies in a row without a usable tool call"
            break
        if time.perf_counter() >= run.deadline:
            run.status = "agent_timeout"
            break
    return run


def _review(run: AgentRun, command: str, review: tuple) -> str | None:
    """The denial to answer instead of running the command; None to run it."""
    gate, task_id, attempt, turn = review
    rule = gate.policy.rule_for(command)
    if rule is None:
        return None
    t0 = time.perf_counter()
    verdict = gate.approver.decide(ApprovalRequest(task_id, attempt, 0, turn, command, rule))
    waited = time.perf_counter() - t0
    run.deadline += waited
    run.approvals.append({"turn": turn, "command": command, "rule": rule, "allow": verdict.allow,
                          "reason": verdict.reason, "by": verdict.by, "wait_s": round(waited, 4)})
    return None if verdict.allow else denied_observation(verdict)


def _turn_seed(seed, turn: int):
    return None if seed is None else seed * 1000 + turn


def _calls(message: dict) -> list[tuple[str | None, dict | str]]:
    """(id, call) for each call: the structured ones, else those written in the text."""
    structured = message.get("tool_calls")
    if isinstance(structured, list) and structured:
        return [(c.get("id") if isinstance(c, dict) else None, _plain(c)) for c in structured]
    return [(None, c) for c in read_calls(message.get("content") or "")]


def _plain(call) -> dict | str:
    """An OpenAI tool call as {"name", "arguments"}; its JSON text when it has no usable name."""
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        return json.dumps(call)
    return {"name": fn["name"], "arguments": fn.get("arguments") or "{}"}


def _answer(run: AgentRun, message: dict, sandbox: Sandbox, limits: AgentLimits,
            harness: ToolHarness, review: tuple | None) -> bool:
    """Append the assistant message and one tool message per call; True if any call was usable.
    review: (gate, task id, attempt, turn) when commands may wait for a reviewer."""
    structured = message.get("tool_calls") or []
    content = message.get("content") or ""
    run.messages.append({"role": "assistant", "content": content,
                         **({"tool_calls": structured} if isinstance(structured, list) and structured else {})})
    calls = _calls(message)
    if not calls:
        run.n_malformed += 1
        run.messages.append({"role": "user", "content": NO_TOOL_HINT})
        return False
    usable = False
    for i, (call_id, call) in enumerate(calls):
        action = check_call(call, harness.specs)
        usable = usable or action.kind in ("tool", "submit")
        content = _result(run, action, sandbox, limits, harness, review)
        run.messages.append({"role": "tool", "tool_call_id": call_id or f"call_{i}", "content": content})
        if run.submitted:
            break
    return usable


def _result(run: AgentRun, action: Action, sandbox: Sandbox, limits: AgentLimits,
            harness: ToolHarness, review: tuple | None) -> str:
    """What the tool message says: the failure's hint, "submitted", a denial, or the output."""
    if action.kind == "submit":
        run.submitted = True
        return "submitted"
    if action.kind != "tool":
        run.n_malformed += 1
        return action.hint
    command = action.args.get("command") if action.name == "bash" else \
        f"{action.name} {json.dumps(action.args)}"
    if review is not None and (denial := _review(run, command, review)):
        return denial
    left = max(0.1, run.deadline - time.perf_counter())
    result = harness.run(action, sandbox, min(limits.command_timeout_s, left))
    run.sandbox_s += result.duration_s
    return format_observation(result, limits.observation_budget)
