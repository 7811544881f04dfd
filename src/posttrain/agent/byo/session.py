"""One bring-your-own-agent episode as the rollout endpoint serves it: each chat request framed
token-in/token-out onto the episode's stream and sampled, each tool call checked and run in the
episode's sandbox, both recorded on the Episode as the built-in loop records them.

The stream rule: a request that extends the previous one (byo/messages.py) appends only its new
messages, each framed alone, after the ids sampled last; one that does not closes the stream as
a segment and starts again from the whole conversation framed afresh
(`timings["byo_history_rewrites"]` counts them). Sampled ids are never re-tokenised.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace

from posttrain.agent.byo import messages as msgs
from posttrain.agent.config import AgentConfig
from posttrain.agent.harness.calls import MAX_CALLS_PER_REPLY, check_call
from posttrain.agent.live import Live
from posttrain.agent.protocol import Action, format_observation
from posttrain.agent.retry import EpisodeFault, with_retries
from posttrain.engine.base import Engine, SamplingParams
from posttrain.toolcalls import read_calls
from posttrain.types import PARSE_FAILURES, Completion, Step, Turn


class EndpointError(Exception):
    """A request refused: the HTTP status, the message and the OpenAI error code."""

    def __init__(self, status: int, message: str, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


@dataclass
class Call:
    """One chat request as the engine saw it: the prompt ids and what it sampled after them."""

    prompt: list[int]
    completion: Completion


class Session:
    """The state of one episode behind one API key. Requests are served one at a time."""

    def __init__(self, live: Live, framer, engine: Engine, params: SamplingParams,
                 cfg: AgentConfig, engine_lock: AbstractContextManager):
        self.live, self.framer, self.engine, self.params, self.cfg = live, framer, engine, params, cfg
        self.engine_lock = engine_lock        # held around generate where the engine is not concurrent
        self.lock = threading.Lock()
        self.previous: list[dict] | None = None   # the last request's messages, then its reply
        self.calls: list[Call] = []
        self.over = ""          # why no more requests are served (submitted, turn limit, ...)
        self.started = time.perf_counter()

    @property
    def episode(self):
        return self.live.episode

    @property
    def submitted(self) -> bool:
        return self.over == "submitted"

    def task(self) -> dict:
        specs = self.live.harness.specs.values()
        return {"instruction": self.live.task.instruction,
                "tools": [{"type": "function", "function": s} for s in specs]}

    def close(self) -> None:
        """Serve nothing more (waits for a request in flight)."""
        with self.lock:
            self.over = self.over or "closed"

    def _refuse_if_over(self) -> None:
        if self.over:
            raise EndpointError(400, f"the episode is over ({self.over})", "episode_over")

    def _retried(self, fn, kind: str):
        def count():
            self.episode.retries += 1
        cfg = self.cfg
        try:
            return with_retries(fn, kind, cfg.retries, cfg.retry_backoff_s, cfg.retry_backoff_max_s,
                                count)
        except EpisodeFault as e:   # as the built-in loop: an infra error, never verified
            self.episode.status, self.episode.error, self.over = "infra_error", str(e), "infra error"
            raise EndpointError(503, str(e), "infra_error") from e

    # chat

    def complete(self, messages: list[dict], max_tokens: int | None) -> tuple[dict, str, Call]:
        """The assistant message, finish_reason and engine call of one chat request."""
        with self.lock:
            self._refuse_if_over()
            self._frame(messages)
            ep, cfg = self.episode, self.cfg
            if len(self.calls) >= cfg.max_turns:
                self.over = "turn limit"
                raise EndpointError(400, f"the episode's turn limit ({cfg.max_turns}) is reached",
                                    "turn_limit")
            if len(ep.tokens) + cfg.max_reply_tokens > cfg.max_context:
                ep.status, self.over = "context_overflow", "context limit"
                raise EndpointError(400, f"the episode is over its context limit "
                                    f"({cfg.max_context} tokens)", "context_length_exceeded")
            limit = min(max_tokens or cfg.max_reply_tokens, cfg.max_reply_tokens)
            prompt = list(ep.tokens)
            comp = self._generate(prompt, limit)
            self.calls.append(call := Call(prompt, comp))
            ep.append_completion(comp)
            text, terminated = self.framer.decode_reply(comp.token_ids)
            if not terminated:      # close the turn so the next observation is well framed
                ep.append([self.framer.end_id], sampled=False)
            self._count_failures(text, terminated)
            message, finish = msgs.reply_message(text, terminated, len(self.calls))
            self.previous = [*messages, message]
            return message, finish, call

    def _frame(self, messages: list[dict]) -> None:
        ep, harness = self.episode, self.live.harness
        if self.previous is None:
            ep.append(self._fresh(messages), sampled=False)
            ep.prompt_len = len(ep.tokens)
            return
        tail = msgs.new_messages(self.previous, messages)
        if tail is None:
            ep.restart(self._fresh(messages))
            ep.timings["byo_history_rewrites"] = ep.timings.get("byo_history_rewrites", 0) + 1
            return
        for role, text in msgs.observations(tail):
            ep.append(msgs.frame_observation(harness, self.framer, role, text), sampled=False)

    def _fresh(self, messages: list[dict]) -> list[int]:
        try:
            return msgs.frame_conversation(self.live.harness, self.framer, messages)
        except ValueError as e:
            raise EndpointError(400, str(e), "invalid_messages") from e

    def _generate(self, prompt: list[int], max_tokens: int) -> Completion:
        """One call on the episode's own sampling stream (what it draws does not depend on the
        other agents' requests), timed as a model Step."""
        seed = self.params.seed
        params = replace(self.params, max_tokens=max_tokens, stop_token_ids=[self.framer.end_id],
                         seed=None if seed is None else seed * 1000 + len(self.calls),
                         seed_rows=[self.live.stream])
        t0 = time.time()

        def call():
            with self.engine_lock:
                return self.engine.generate([prompt], params)[0]
        comp = self._retried(call, "engine")
        ep, took = self.episode, time.time() - t0
        ep.timings["generate_s"] = ep.timings.get("generate_s", 0.0) + took
        ep.steps.append(Step("model", len(ep.turns), t0, took, {
            "tokens_in": len(prompt), "tokens_out": len(comp.token_ids), "batch": 1,
            "finish_reason": comp.finish_reason, "policy_version": comp.policy_version}))
        return comp

    def _count_failures(self, text: str, terminated: bool) -> None:
        """Record what of a reply never reaches the tool endpoint as a failure turn: no call, a
        cut-off reply, a block that is not a JSON call. Calls that do reach it are checked there."""
        calls = read_calls(text)[:MAX_CALLS_PER_REPLY]
        if any(isinstance(c, dict) for c in calls):
            failed = [check_call(c, self.live.harness.specs) for c in calls if isinstance(c, str)]
        else:
            failed = [a for a in self.live.harness.parse(text, terminated) if a.kind in PARSE_FAILURES]
        if failed:
            self.episode.turns.append(Turn(text, failed[0].kind, "\n".join(a.hint for a in failed),
                                           None, [a.kind for a in failed]))

    # tools

    def call_tool(self, name: str, arguments: str) -> str:
        """Run one call the agent makes; its output, or the failure the model is told about."""
        with self.lock:
            self._refuse_if_over()
            action = check_call({"name": name, "arguments": arguments or "{}"},
                                self.live.harness.specs)
            ep = self.episode
            if action.kind == "submit":
                ep.turns.append(Turn("submit", "submit", "", None, []))
                self.over = "submitted"
                return "submitted"
            described = f"{name} {json.dumps(action.args) if action.args else arguments}"
            if action.kind in PARSE_FAILURES:
                ep.turns.append(Turn(described, action.kind, action.hint, None, [action.kind]))
                return action.hint
            return self._run(action, described)

    def _run(self, action: Action, described: str) -> str:
        ep, cfg = self.episode, self.cfg
        left = float(self.live.task.config.agent.timeout_sec) - (time.perf_counter() - self.started)
        timeout_s = max(0.1, min(cfg.command_timeout_s, left))
        t0 = time.time()
        result = self._retried(lambda: self.live.harness.run(action, self.live.sandbox, timeout_s),
                               "sandbox")
        ep.steps.append(Step("tool", len(ep.turns), t0, time.time() - t0, {
            "exit_code": result.exit_code, "timed_out": result.timed_out,
            "killed_by": result.killed_by, "tool": action.name}))
        ep.timings["exec_s"] = ep.timings.get("exec_s", 0.0) + result.duration_s
        obs = format_observation(result, cfg.observation_budget)
        ep.turns.append(Turn(described, "tool", obs, result, []))
        return obs
