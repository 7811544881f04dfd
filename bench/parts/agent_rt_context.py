"""Context policies side by side: each policy at each context budget on the long-context and the
multi-turn terminal suites (terminal-tools, and terminal-basics, whose multi-turn families the warm
tiny policy passes some of), with the warm tiny policy and SmolLM2-135M-Instruct on the embedded
engine; pass rate, prompt tokens per episode and how many episodes ran out of context."""

from __future__ import annotations

import time
from pathlib import Path

from posttrain.agent.config import AgentConfig, ContextConfig
from posttrain.agent.framing import framer_for
from posttrain.agent.loop import run_episodes
from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import LocalEngine
from posttrain.evals.textrun import prompt_lengths
from posttrain.tasks import read_task
from posttrain.tasks.suites import generate

POLICIES = ["keep_all", "last_k:k=2", "truncate:max_chars=400,tail_chars=150", "summarise:k=2"]
SUITES = {"longctx": ["tokens=1000"], "terminal-tools": [], "terminal-basics": []}
MANY = ("terminal-basics",)  # the suite the warm tiny policy passes some of: more tasks, so pass rates compare


def suite_tasks(out: Path, size: dict) -> dict[str, list]:
    tasks = {}
    for name, knobs in SUITES.items():
        n = size["ctx_many_tasks" if name in MANY else "ctx_tasks"]
        d = out / "context-tasks" / name
        if not d.is_dir():
            generate(name, d, n, seed=3, split="heldout", knobs=knobs)
        tasks[name] = [read_task(p) for p in sorted(d.iterdir()) if p.is_dir()][:n]
    return tasks


def _prompt_tokens(ep) -> int:
    return sum(sum(prompt_lengths(s.loss_mask)) for s in ep.streams())


def _cell(engine, framer, tasks, policy: str, budget: int, size: dict) -> dict:
    cfg = AgentConfig(max_turns=size["ctx_turns"], max_reply_tokens=size["ctx_reply_tokens"],
                      max_context=budget, workers=4, observation_budget=4000)  # the policy cuts, not the loop
    context = ContextConfig.parse(policy)
    t0 = time.perf_counter()
    eps = run_episodes([(t, 0) for t in tasks], engine, framer, SamplingParams(temperature=0.7, seed=0),
                       cfg, [context] * len(tasks))
    n = len(eps)
    return {"policy": policy, "budget": budget, "episodes": n,
            "pass_rate": round(sum(ep.reward >= 1 for ep in eps) / n, 3),
            "prompt_tokens_per_episode": round(sum(_prompt_tokens(ep) for ep in eps) / n, 1),
            "context_overflow": sum(ep.status == "context_overflow" for ep in eps),
            "errors": sum(ep.status == "infra_error" for ep in eps), "wall_s": round(time.perf_counter() - t0, 1)}


def context_policies(models: dict[str, Path], out: Path, size: dict, progress=print) -> list[dict]:
    from posttrain.models.tiny import load_policy

    tasks = suite_tasks(out, size)
    rows = []
    for model_name, path in models.items():
        model, tokenizer = load_policy(path)
        engine, framer = LocalEngine(model, tokenizer), framer_for(tokenizer)
        for suite, ts in tasks.items():
            for budget in size["budgets"]:
                for policy in POLICIES:
                    row = {"model": model_name, "suite": suite} | _cell(engine, framer, ts, policy, budget, size)
                    progress(row)
                    rows.append(row)
    return rows
