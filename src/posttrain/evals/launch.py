"""From an eval request (what the CLI was given) to a finished job: conditions, executor, run.

A local checkpoint directory runs on the embedded engine with the text protocol. A --base-url
runs against that OpenAI-compatible endpoint, with the key read from the environment variable
the request names (never from argv), in one of two protocols: `tools` (the built-in
tool-calling agent, any chat model) or `text` (the agent's own text protocol, token-in/
token-out over /v1/completions, as `rl` trains and evaluates; the checkpoint directory given
as --model supplies the tokenizer). By default an endpoint gets `text` when --model is a
checkpoint directory and `tools` when it is a model name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from posttrain.agent.approval import ApprovalConfig, gate_for
from posttrain.agent.checkpoint import EpisodeStore
from posttrain.errors import ConfigError
from posttrain.agent.harness.chatclient import ChatClient
from posttrain.evals.conditions import (PROTOCOL_DEFAULTS, EvalConditions, default_job_name,
                                        model_digest, tasks_digest)
from posttrain.evals.contexts import check_domains, parse_contexts
from posttrain.evals.domains import task_groups
from posttrain.evals.jobdir import JobDir
from posttrain.evals.pricing import load_prices
from posttrain.evals.record import TrialRecord
from posttrain.evals.runner import ToolExecutor, run_job
from posttrain.evals.trials import TaskSandboxes
from posttrain.evals.taskset import read_tasks
from posttrain.models.checkpoint_path import model_dir
from posttrain.tasks import Task


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
    protocol: str | None = None       # endpoints: "text" | "tools"; None: from --model (see above)
    served_model: str | None = None   # text over an endpoint: its model id (default: the dir's name)
    context: list[str] = field(default_factory=list)  # --context [DOMAIN=]SPEC (evals/contexts.py)
    manifest: str | None = None       # a validation manifest: only its "ok" tasks run
    otel_endpoint: str | None = None  # text protocol: a trace per trial to this OTLP/HTTP collector
    approval_rules: list[str] = field(default_factory=list)  # --approve: commands that wait for...
    approver: object = None           # ...this reviewer (agent/approval_terminal.py, approval_http.py)
    device: str = "auto"              # a checkpoint's embedded engine: devices.py (not a job condition)


def checkpoint_dir(model: str) -> Path | None:
    """The checkpoint directory --model names (models/checkpoint_path.py, shared with serve)."""
    return model_dir(model)


def pick_protocol(req: EvalRequest) -> str:
    ckpt = checkpoint_dir(req.model)
    protocol = req.protocol or ("text" if ckpt or not req.base_url else "tools")
    if protocol not in ("text", "tools"):
        raise ConfigError(f"--protocol must be text or tools, got {protocol!r}")
    if protocol == "tools" and not req.base_url:
        raise ConfigError("--protocol tools needs --base-url (a local checkpoint runs the text protocol)")
    if protocol == "text" and not ckpt:
        hint = " to evaluate an endpoint by its model name, pass --base-url" if not req.base_url else \
            " the text protocol over an endpoint takes its tokenizer from it; or pass --protocol tools"
        raise ConfigError(f"--model {req.model!r} is not a checkpoint directory (no config.json);{hint}")
    return protocol


def build_conditions(req: EvalRequest, tasks: list[Task]) -> EvalConditions:
    protocol = pick_protocol(req)
    if req.jobs < 1:
        raise ConfigError("--jobs must be >= 1")
    ckpt = checkpoint_dir(req.model) if protocol == "text" else None
    model = str(ckpt.resolve()) if ckpt else req.model
    digest = model_digest(ckpt) if ckpt else ""
    settings = {**PROTOCOL_DEFAULTS[protocol],
                **{k: v for k, v in req.settings.items() if v is not None}}
    contexts = parse_contexts(req.context)
    check_domains(contexts, tasks)
    return EvalConditions(model=model, protocol=protocol, k=req.k, base_url=req.base_url,
                          tasks_digest=tasks_digest(tasks), task_ids=tuple(t.id for t in tasks),
                          model_digest=digest, task_groups=task_groups(tasks),
                          context=contexts, approval=tuple(req.approval_rules),
                          **settings)


def open_endpoint(req: EvalRequest, c: EvalConditions) -> ChatClient | None:
    """A client for the endpoint, checked before the job directory exists (None: no endpoint).
    For the text protocol it also checks that the endpoint serves the model id to be asked for."""
    if not c.base_url:
        return None
    key = os.environ.get(req.api_key_env) if req.api_key_env else None
    client = ChatClient(c.base_url, c.model if c.protocol == "tools" else served_name(req, c), key,
                        timeout_s=req.request_timeout_s, max_connections=max(8, req.jobs * 2))
    try:
        client.check_reachable()
        if c.protocol == "text":
            client.check_serves()
    except BaseException:
        client.close()
        raise
    return client


def served_name(req: EvalRequest, c: EvalConditions) -> str:
    return req.served_model or Path(c.model).name  # `posttrain serve` reports the dir's name


def make_executor(req: EvalRequest, c: EvalConditions, tasks: list[Task], client: ChatClient | None,
                  job_path: Path | None = None):
    """(executor, close) for the request's protocol, local or over the endpoint `client` reaches;
    either checkpoints its episodes under job_path/.episodes."""
    checkpoints = job_path / ".episodes" if job_path else None
    if c.protocol == "text":
        from posttrain.evals.textrun import load_text_executor

        close_client = client.close if client else (lambda: None)
        try:
            executor = load_text_executor(c, req.jobs, req.backend, client, req.otel_endpoint, checkpoints,
                                          req.approver, req.device)
        except BaseException:
            close_client()
            raise

        def close_text() -> None:
            executor.close()
            close_client()

        return executor, close_text
    try:
        sandboxes = TaskSandboxes(tasks, req.backend, warm=req.jobs)
    except BaseException:
        client.close()
        raise

    store = EpisodeStore(checkpoints) if checkpoints else None

    def close() -> None:
        sandboxes.close()
        client.close()
        if store is not None:
            store.close()

    gate = gate_for(ApprovalConfig(on=bool(c.approval), rules=list(c.approval)), req.approver)
    return ToolExecutor(client, c, sandboxes, req.jobs, gate, store), close


def drop_written_checkpoints(job: JobDir) -> None:
    """A kill between a trial's write and its checkpoint's drop leaves the checkpoint of a trial
    that will not run again: drop it, so .episodes holds only trials still to finish."""
    store = EpisodeStore(job.path / ".episodes")
    for task_id, attempt in job.done():
        store.drop((task_id, attempt, 0))
    store.close()


def evaluate(req: EvalRequest, on_start: Callable[[Path, int, int], None] | None = None,
             on_trial: Callable[[TrialRecord], None] | None = None) -> tuple[Path, dict]:
    """Run (or resume) the job; returns its directory and summary."""
    tasks = read_tasks(req.tasks_dir, req.manifest)
    c = build_conditions(req, tasks)
    prices = load_prices(req.prices)
    client = open_endpoint(req, c)  # an unreachable endpoint fails before the job dir exists
    try:
        job = JobDir(Path(req.jobs_dir) / (req.job or default_job_name(c))).open(c)
    except BaseException:
        if client:
            client.close()
        raise
    try:
        already = len(job.done())
        drop_written_checkpoints(job)
        if on_start:
            on_start(job.path, len(tasks) * c.k, already)
        executor, close = make_executor(req, c, tasks, client, job.path)
        try:
            summary = run_job(job, tasks, c, executor, prices, req.jobs, on_trial)
        finally:
            close()
    finally:
        job.close()
    return job.path, summary
