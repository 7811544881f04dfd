"""The built-in tool-calling agent for OpenAI-compatible endpoints: `bash` and `submit` tools.

Each turn: one chat completion; every tool call in the reply is answered with a `tool`
message (command output, or an error for a malformed call). The agent phase ends on
`submit`, the turn limit, the agent timeout, a context overflow, an endpoint failure, or
MAX_MALFORMED_IN_A_ROW replies in a row with no usable tool call (a model_error). With a Gate
(agent/approval.py), a bash call its policy matches waits for a reviewer; a denied one is
answered with the denial, and the wait is added to the agent's deadline. With checkpoints
(evals/toolcheckpoint.py), a trial killed midway goes on at its last completed turn.
A reply without structured `tool_calls` whose text holds Hermes-style `<tool_call>` blocks
is read as those calls (what vLLM's hermes parser does server-side), so models served
without a tool-call parser, such as by `posttrain serve`, can still act.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field

from posttrain.agent.approval import ApprovalRequest, Gate, denied_observation
from posttrain.agent.protocol import format_observation
from posttrain.evals.chatclient import ChatClient, ContextOverflow, ModelError
from posttrain.evals.toolcheckpoint import ToolCheckpoints
from posttrain.sandbox import Sandbox

SYSTEM_PROMPT = ("You are an autonomous agent in a Linux sandbox; your working directory is "
                 "/app. Use the bash tool to run shell commands, one per call, and read their "
                 "output. When the task is complete, call the submit tool.")
NO_TOOL_HINT = "error: no tool call. Call the bash tool to run a command, or submit when done."
MAX_MALFORMED_IN_A_ROW = 3

TOOL_SPECS = {
    "bash": {"type": "function", "function": {
        "name": "bash", "description": "Run one shell command in /app and return its output.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                       "required": ["command"]}}},
    "submit": {"type": "function", "function": {
        "name": "submit", "description": "Declare the task complete and end the episode.",
        "parameters": {"type": "object", "properties": {}}}},
}


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


TEXT_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def tool_calls_in_text(content: str) -> list[dict]:
    """Tool calls written in the reply text, Hermes/Qwen style, for servers that do not parse
    them: `<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>`."""
    calls = []
    for i, raw in enumerate(TEXT_CALL_RE.findall(content or "")):
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            args = obj.get("arguments", {})
            args = args if isinstance(args, str) else json.dumps(args)
            calls.append({"id": f"text_call_{i}", "type": "function",
                          "function": {"name": obj.get("name"), "arguments": args}})
        else:  # keep it, so the model is told its call was malformed
            calls.append({"id": f"text_call_{i}", "type": "function",
                          "function": {"name": None, "arguments": raw}})
    return calls


def parse_tool_call(call: dict, allowed: tuple[str, ...]) -> tuple[str, dict, str]:
    """(name, arguments, error); error is non-empty when the call cannot be used."""
    fn = call.get("function") if isinstance(call, dict) else None
    name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str) or name not in allowed:
        return "", {}, f"error: unknown tool {name!r}; available tools: {', '.join(allowed)}"
    raw = fn.get("arguments") or "{}"
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as e:
        return name, {}, f"error: arguments of {name} are not valid JSON ({e.msg})"
    if not isinstance(args, dict):
        return name, {}, f"error: arguments of {name} must be a JSON object"
    if name == "bash" and not (isinstance(args.get("command"), str) and args["command"].strip()):
        return name, {}, "error: bash needs a non-empty string argument 'command'"
    return name, args, ""


def run_agent(instruction: str, sandbox: Sandbox, client: ChatClient, limits: AgentLimits,
              tools: tuple[str, ...], gate: Gate | None = None, trial: tuple[str, int] = ("", 0),
              checkpoints: ToolCheckpoints | None = None) -> AgentRun:
    """The agent phase; `trial` (task id, attempt) names it to the gate's reviewer. With
    `checkpoints`, it goes on from the trial's last checkpoint and saves one after every turn."""
    run = AgentRun(messages=[{"role": "system", "content": SYSTEM_PROMPT},
                             {"role": "user", "content": instruction}])
    specs = [TOOL_SPECS[t] for t in tools]
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
        usable = _answer(run, reply.message, sandbox, limits, tools, review)
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


def _answer(run: AgentRun, message: dict, sandbox: Sandbox, limits: AgentLimits,
            tools: tuple[str, ...], review: tuple | None) -> bool:
    """Append the assistant message and one tool message per call; True if any call was usable.
    review: (gate, task id, attempt, turn) when commands may wait for a reviewer."""
    calls = message.get("tool_calls") or []
    calls = calls if isinstance(calls, list) else []
    content = message.get("content") or ""
    run.messages.append({"role": "assistant", "content": content,
                         **({"tool_calls": calls} if calls else {})})
    calls = calls or tool_calls_in_text(content)
    if not calls:
        run.n_malformed += 1
        run.messages.append({"role": "user", "content": NO_TOOL_HINT})
        return False
    usable = False
    for i, call in enumerate(calls):
        name, args, err = parse_tool_call(call, tools)
        call_id = (call.get("id") if isinstance(call, dict) else None) or f"call_{i}"
        if err:
            run.n_malformed += 1
            content = err
        elif name == "submit":
            usable, run.submitted, content = True, True, "submitted"
        elif review is not None and (denial := _review(run, args["command"], review)):
            usable, content = True, denial
        else:
            usable = True
            left = max(0.1, run.deadline - time.perf_counter())
            result = sandbox.exec(args["command"], timeout_s=min(limits.command_timeout_s, left))
            run.sandbox_s += result.duration_s
            content = format_observation(result, limits.observation_budget)
        run.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
        if run.submitted:
            break
    return usable
