"""The rollout engine of `posttrain rl`, chosen once here from `engines.kind` (ENGINES):

- "embedded" (the default): the paged engine in this process, over a copy of the policy.
- "process": the same engine in a child process (engine/process.py). It generates on its own
  core while the trainer computes; single-turn episodes run there whole (InEngineProcess).
- "vllm": vLLM servers the run starts or attaches to (recipes/rl/served_engine.py).

Each builder is a context manager over (cfg, model, tokenizer, env). It yields the gated
engine the pipeline publishes to and the env whose waves the pipeline runs. Every kind goes
through the same conformance gate (rollout/conformance.py): at start, and every
engines.check_every weight updates.
"""

from __future__ import annotations

import contextlib
import copy
import os

import torch

from posttrain.devices import module_device
from posttrain.engine.affinity import split_cores
from posttrain.engine.paged.kernel_plan import config_plan
from posttrain.engine.paged.local import EngineConfig, LocalEngine
from posttrain.engine.process import ProcessEngine
from posttrain.errors import ConfigError
from posttrain.rollout.conformance import GatedEngine
from posttrain.rollout.envs import InEngineProcess, SingleTurnEnv


def _engine_config(cfg) -> EngineConfig:
    # algo.exact_logprobs: the engine's half of bit-identical logprobs (docs/rl.md)
    return EngineConfig(dtype=cfg.engines.compute_dtype.name, batch_invariant=cfg.algo.exact_logprobs)


def kernel_plan_of(cfg, model) -> dict | None:
    """The kernel plan (kernels/plan.py) the paged engine of the embedded and process kinds runs on
    this machine (on the policy's device), as summary.json records it; None for vLLM servers."""
    if cfg.engines.kind == "vllm":
        return None
    return config_plan(_engine_config(cfg), model.config, str(module_device(model))).as_dict()


def _gated(cfg, engine, tok, model) -> GatedEngine:
    """The engine behind the conformance gate, checked against the trainer before the run; side
    by side for an agent program, whose episodes send one prompt per request."""
    gated = GatedEngine(engine, tok, cfg.run_dir, cfg.engines, cfg.rollout.temperature,
                        side_by_side=cfg.agent.program is not None)
    gated.start(model)
    return gated


@contextlib.contextmanager
def embedded_engine(cfg, model, tok, env):
    yield _gated(cfg, LocalEngine(copy.deepcopy(model), tok, config=_engine_config(cfg)), tok, model), env


@contextlib.contextmanager
def _pinned(pid: int):
    """The child on a core of its own (split_cores); the trainer then runs no more intra-op
    threads than it has cores left (two on one core stall). Yields the child's cores or None."""
    with split_cores(pid) as cores:
        if not cores:
            yield None
            return
        threads = torch.get_num_threads()
        torch.set_num_threads(min(threads, len(os.sched_getaffinity(0))))
        try:
            yield cores
        finally:
            torch.set_num_threads(threads)


@contextlib.contextmanager
def process_engine(cfg, model, tok, env):
    """The engine in a child process; a single-turn env's episodes run in it. Pinned to a
    core of its own per engines.pin_cores (None: pinned for single-turn envs only, since
    sandbox tasks start sandboxes that need the cores)."""
    if module_device(model).type != "cpu":
        raise ConfigError(f'engines.kind = "process" runs its engine on a CPU core, and the policy is on '
                          f'{module_device(model)}: use engines.kind = "embedded" there (docs/gpu.md)')
    single_turn = isinstance(env, SingleTurnEnv) and not env.judged  # a judge's engine stays here
    pin = cfg.engines.pin_cores if cfg.engines.pin_cores is not None else single_turn
    # One thread: the engine's batches are small, so generation is latency-bound.
    with ProcessEngine(model, tok, engine_config=_engine_config(cfg), threads=1) as child, \
            contextlib.ExitStack() as stack:
        engine = _gated(cfg, child, tok, model)
        if pin:
            engine.cores = stack.enter_context(_pinned(child.pid))
        yield engine, InEngineProcess(env, engine) if single_turn else env


@contextlib.contextmanager
def vllm_engine(cfg, model, tok, env):
    from posttrain.recipes.rl.served_engine import served_rollout_engine

    with served_rollout_engine(cfg, model, tok) as engine:
        yield engine, env


ENGINES = {"embedded": embedded_engine, "process": process_engine, "vllm": vllm_engine}


def rollout_engine(cfg, model, tok, env):
    """The one place the rollout engine is chosen (`engines.kind`): a context manager that
    yields (engine, env) for the pipeline."""
    return ENGINES[cfg.engines.kind](cfg, model, tok, env)
