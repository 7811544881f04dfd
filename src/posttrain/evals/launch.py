"""From an eval request (what the CLI was given) to a finished job: conditions, executor, run.

A local checkpoint directory runs on the embedded engine with the text protocol; a
--base-url runs the built-in tool-calling agent against that OpenAI-compatible endpoint,
with the key read from the environment variable the request names (never from argv).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from posttrain.errors import ConfigError, TaskError
from posttrain.evals.chatclient import ChatClient
from posttrain.evals.conditions import (PROTOCOL_DEFAULTS, EvalConditions, default_job_name,
                                        model_digest, tasks_digest)
from posttrain.evals.domains import task_groups
from posttrain.evals.jobdir import JobDir
from posttrain.evals.pricing import load_prices
from posttrain.evals.record import TrialRecord
from posttrain.evals.runner import ToolExecutor, run_job
from posttrain.evals.trials import TaskSandboxes
from posttrain.tasks import Task, load_tasks


@dataclass
class EvalRequest:
    tasks_dir: str
    model: str
    k: int = 5
    jobs: int = 4
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    job: str | None = None
    jobs_dir: str = "jobs"
    backend: str = "bwrap"
    prices: str | None = None
    request_timeout_s: float = 120.0
    settings: dict = field(default_factory=dict)  # EvalConditions fields the user set


def read_tasks(tasks_dir: str) -> list[Task]:
    p = Path(tasks_dir)
    if p.is_dir() and not any(p.iterdir()):
        raise TaskError(f"{p}: the task directory is empty")
    return load_tasks(p)


def build_conditions(req: EvalRequest, tasks: list[Task]) -> EvalConditions:
    protocol = "tools" if req.base_url else "text"
    if protocol == "text" and not (Path(req.model) / "config.json").is_file():
        raise ConfigError(f"--model {req.model!r} is not a checkpoint directory (no config.json);"
                          " to evaluate an endpoint pass --base-url")
    if req.jobs < 1:
        raise ConfigError("--jobs must be >= 1")
    model = str(Path(req.model).resolve()) if protocol == "text" else req.model
    digest = model_digest(Path(model)) if protocol == "text" else ""
    settings = {**PROTOCOL_DEFAULTS[protocol],
                **{k: v for k, v in req.settings.items() if v is not None}}
    return EvalConditions(model=model, protocol=protocol, k=req.k, base_url=req.base_url,
                          tasks_digest=tasks_digest(tasks), task_ids=tuple(t.id for t in tasks),
                          model_digest=digest, task_groups=task_groups(tasks),
                          **settings)


def make_executor(req: EvalRequest, c: EvalConditions, tasks: list[Task]):
    """(executor, close) for the request's protocol."""
    if c.protocol == "text":
        from posttrain.evals.textrun import load_text_executor

        return load_text_executor(c, req.jobs, req.backend), (lambda: None)
    key = os.environ.get(req.api_key_env) if req.api_key_env else None
    client = ChatClient(c.base_url, c.model, key, timeout_s=req.request_timeout_s,
                        max_connections=max(8, req.jobs * 2))
    try:
        client.check_reachable()
        sandboxes = TaskSandboxes(tasks, req.backend, warm=req.jobs)
    except BaseException:
        client.close()
        raise

    def close() -> None:
        sandboxes.close()
        client.close()

    return ToolExecutor(client, c, sandboxes, req.jobs), close


def evaluate(req: EvalRequest, on_start: Callable[[Path, int, int], None] | None = None,
             on_trial: Callable[[TrialRecord], None] | None = None) -> tuple[Path, dict]:
    """Run (or resume) the job; returns its directory and summary."""
    tasks = read_tasks(req.tasks_dir)
    c = build_conditions(req, tasks)
    prices = load_prices(req.prices)
    job = JobDir(Path(req.jobs_dir) / (req.job or default_job_name(c))).open(c)
    try:
        already = len(job.done())
        if on_start:
            on_start(job.path, len(tasks) * c.k, already)
        executor, close = make_executor(req, c, tasks)
        try:
            summary = run_job(job, tasks, c, executor, prices, req.jobs, on_trial)
        finally:
            close()
    finally:
        job.close()
    return job.path, summary
