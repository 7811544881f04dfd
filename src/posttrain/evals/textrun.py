"""The agent's text protocol, in lockstep batches: a local checkpoint on the embedded engine, or
an endpoint's /v1/completions (token ids in and out) with the checkpoint's tokenizer.

Batches of up to --jobs trials run through posttrain.agent.loop.run_episodes (one batched
generate per turn over every live episode, so the engine is shared); each finished
Episode becomes a TrialRecord. With a job directory the episodes are checkpointed, and each
trial samples on its own stream: --jobs and a resume leave its samples as they are. Without one
(temperature > 0), which sample a trial draws depends on the batch it ran in.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from posttrain.agent.approval import ApprovalConfig, Gate, gate_for
from posttrain.agent.chat import ChatFramer
from posttrain.agent.checkpoint import EpisodeStore
from posttrain.agent.config import AgentConfig
from posttrain.agent.loop import run_episodes
from posttrain.engine.base import SamplingParams
from posttrain.evals import taxonomy
from posttrain.evals.conditions import EvalConditions
from posttrain.evals.contexts import task_contexts
from posttrain.evals.jobdir import now_iso
from posttrain.evals.record import TrialOutput, TrialRecord
from posttrain.evals.trials import with_timeouts
from posttrain.tasks import Task
from posttrain.types import Episode

NO_REWARD = ("infra_error", "verifier_error", "verifier_timeout")


def prompt_lengths(loss_mask: list[int]) -> list[int]:
    """Context length at each model call: the index where each run of sampled tokens starts."""
    return [i for i, m in enumerate(loss_mask) if m == 1 and (i == 0 or loss_mask[i - 1] == 0)]


def turn_rows(ep: Episode) -> list[dict]:
    """Each turn of the transcript with its timings: seconds from the episode's first step to
    the model call, the model's and the command's seconds, the command's exit code, and a
    reviewer's verdict on it (with --approve)."""
    t0 = min((s.start_s for s in ep.steps), default=0.0)
    steps = {(s.kind, s.turn): s for s in ep.steps}
    rows = []
    for i, tr in enumerate(ep.turns):
        model, tool, verdict = (steps.get((kind, i)) for kind in ("model", "tool", "approval"))
        rows.append({"action": tr.action, "kind": tr.kind, "observation": tr.observation,
                     "exit_code": tr.exec_result.exit_code if tr.exec_result else None,
                     "duration_s": tr.exec_result.duration_s if tr.exec_result else None,
                     "at_s": round(model.start_s - t0, 4) if model else None,
                     "model_s": round(model.duration_s, 4) if model else None,
                     "tool_s": round(tool.duration_s, 4) if tool else None,
                     "tokens_in": model.attributes.get("tokens_in") if model else None,
                     "tokens_out": model.attributes.get("tokens_out") if model else None,
                     **({"approval": {**verdict.attributes, "wait_s": round(verdict.duration_s, 4)}}
                        if verdict else {})})
    return rows


def checkpoint_rows(ep: Episode) -> list[dict]:
    """Each snapshot and restore of the episode's checkpoints, with its milliseconds."""
    return [{"kind": s.kind, "turn": s.turn, "ms": round(s.duration_s * 1e3, 3)}
            for s in ep.steps if s.kind in ("snapshot", "restore")]


def episode_output(ep: Episode, c: EvalConditions, framer: ChatFramer, wall_s: float,
                   started_at: str) -> TrialOutput:
    reward = None if ep.status in NO_REWARD else ep.reward
    status = taxonomy.classify(ep.status, reward)
    t = ep.timings
    streams = ep.streams()
    rec = TrialRecord(
        ep.task_id, ep.group_id, status, reward, dict(ep.reward_details), ep.error,
        n_input_tokens=sum(sum(prompt_lengths(s.loss_mask)) for s in streams),
        n_output_tokens=ep.tokens_out, context_tokens=max(len(s.tokens) for s in streams),
        n_turns=len(ep.turns),
        n_malformed=sum(1 for tr in ep.turns if tr.kind in ("malformed", "unterminated")),
        timings={"setup_s": t.get("sandbox_start_s", 0.0), "model_s": t.get("generate_s", 0.0),
                 "sandbox_s": t.get("exec_s", 0.0), "verifier_s": t.get("verify_s", 0.0),
                 "total_s": wall_s},
        started_at=started_at, finished_at=now_iso())
    decode = framer.tokenizer.decode
    trajectory = {"agent": "posttrain-text", "model": c.model, "task": ep.task_id,
                  "attempt": ep.group_id, "system_prompt": framer.system_prompt,
                  "turns": turn_rows(ep), "transcript": decode(ep.tokens), "retries": ep.retries,
                  "earlier_segments": [decode(s.tokens) for s in ep.segments],
                  "checkpoints": checkpoint_rows(ep)}
    files = {"reward.txt": f"{reward}\n"} if reward is not None else {}
    if ep.error:
        files["error.txt"] = ep.error + "\n"
    return TrialOutput(rec, trajectory, files)


@dataclass
class TextExecutor:
    """Runs (task, attempt) pairs through a shared local engine in batches of n_jobs."""

    engine: object
    framer: ChatFramer
    conditions: EvalConditions
    agent_config: AgentConfig
    n_jobs: int
    tracer: object = None       # agent/traces.py's EpisodeTracer, or None
    store: EpisodeStore | None = None   # per-turn checkpoints of the episodes in flight
    gate: Gate | None = None    # --approve: the commands that wait for a reviewer

    def run(self, items: list[tuple[Task, int]]) -> Iterator[TrialOutput]:
        c = self.conditions
        params = SamplingParams(temperature=c.temperature, top_p=c.top_p,
                                max_tokens=c.max_reply_tokens, seed=c.seed)
        for i in range(0, len(items), self.n_jobs):
            batch = [(with_timeouts(t, c), a) for t, a in items[i:i + self.n_jobs]]
            started, t0 = now_iso(), time.perf_counter()
            try:
                contexts = task_contexts(c.context, [t for t, _ in batch])
                episodes = run_episodes(batch, self.engine, self.framer, params, self.agent_config,
                                        contexts, self.tracer, self.store, self.gate, keep_finished=True)
            except Exception as e:  # the engine or loop broke: the batch's trials are infra errors
                error = f"{type(e).__name__}: {e}"
                episodes = [Episode(t.id, a, status="infra_error", error=error) for t, a in batch]
            wall = time.perf_counter() - t0
            for ep in episodes:
                yield episode_output(ep, c, self.framer, wall, started)
                if self.store is not None:   # the caller has written this trial by now
                    self.store.drop((ep.task_id, ep.group_id, 0))

    def close(self) -> None:
        """Send the traces still pending; remove the checkpoint dir if no episode is left in it."""
        if self.tracer is not None:
            self.tracer.close()
        if self.store is not None:
            self.store.close()


def load_text_executor(c: EvalConditions, n_jobs: int, backend: str, client=None,
                       otel_endpoint: str | None = None, checkpoints: Path | None = None,
                       approver=None, device: str = "auto") -> TextExecutor:
    """The checkpoint directory named by c.model in an embedded engine, or, given the endpoint's
    ChatClient, that endpoint's /v1/completions with the checkpoint's tokenizer (token ids in and
    out, so the model sees exactly the tokens it sampled, as in `rl`). With otel_endpoint, each
    trial's steps go there as one trace; with checkpoints, a killed job's episodes resume at
    their last completed turn (agent/checkpoint.py); with c.approval rules, a command they match
    waits for `approver` (agent/approval.py). The embedded engine runs on `device`, resolved
    here once (devices.py: "auto" is a GPU where torch sees one)."""
    from posttrain.agent.framing import framer_for

    if client is None:
        from posttrain.devices import resolve_device
        from posttrain.engine.paged.local import LocalEngine
        from posttrain.models.tiny import load_policy

        model, tokenizer = load_policy(c.model)
        engine, config = LocalEngine(model, tokenizer, device=resolve_device(device)), model.config
    else:
        engine, tokenizer, config = _endpoint_engine(c.model, client)
    max_ctx = int(getattr(config, "max_position_embeddings", 2048) or 2048)
    cfg = AgentConfig(max_turns=c.max_turns, max_reply_tokens=c.max_reply_tokens,
                      observation_budget=c.observation_budget, command_timeout_s=c.command_timeout_s,
                      max_context=max_ctx, sandbox_backend=backend, workers=max(1, n_jobs),
                      approval=ApprovalConfig(on=bool(c.approval), rules=list(c.approval)))
    tracer = None
    if otel_endpoint:
        from posttrain.agent.traces import EpisodeTracer
        from posttrain.otel import OtelConfig

        tracer = EpisodeTracer(OtelConfig(endpoint=otel_endpoint, service_name="posttrain-eval"))
    store = EpisodeStore(checkpoints) if checkpoints else None
    return TextExecutor(engine, framer_for(tokenizer), c, cfg, n_jobs, tracer, store,
                        gate_for(cfg.approval, approver))


def _endpoint_engine(checkpoint: str, client):
    from transformers import AutoConfig, AutoTokenizer

    from posttrain.engine.clients.openai import RemoteEngine

    root = client.base_url.rstrip("/").removesuffix("/v1")  # RemoteEngine adds /v1 itself
    engine = RemoteEngine(root, client.model, client.api_key, timeout=client.timeout_s)
    return engine, AutoTokenizer.from_pretrained(checkpoint), AutoConfig.from_pretrained(checkpoint)
