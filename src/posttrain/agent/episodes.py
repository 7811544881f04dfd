"""Which program acts in an episode, chosen in one place: the user's agent program where
`agent.program` names one (agent/byo/), else the built-in loop (agent/loop.py)."""

from __future__ import annotations

from posttrain.agent.byo import run_byo_episodes
from posttrain.agent.config import AgentConfig
from posttrain.agent.loop import run_episodes
from posttrain.engine.base import Engine, SamplingParams
from posttrain.types import Episode


def run_agent_episodes(jobs: list, engine: Engine, framer, params: SamplingParams, cfg: AgentConfig,
                       contexts: list | None = None, tracer=None, store=None,
                       progress=None) -> list[Episode]:
    """One episode per (task, group_id), in order. Context policies and checkpoints are the
    built-in loop's: an agent program keeps its own history and is rerun whole."""
    if cfg.program:
        return run_byo_episodes(jobs, engine, framer, params, cfg, list(cfg.program),
                                tracer=tracer, progress=progress)
    return run_episodes(jobs, engine, framer, params, cfg, contexts, tracer, store, progress=progress)
