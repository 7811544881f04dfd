"""`posttrain eval`: evaluate a checkpoint or an endpoint on a task set with error bars.

    posttrain eval --tasks DIR --model CKPT_DIR -k 5 --jobs 4
    posttrain eval --tasks DIR --model NAME --base-url http://host/v1 --api-key-env KEY -k 5
    posttrain eval --tasks DIR --model CKPT_DIR --base-url http://127.0.0.1:8000/v1   # text protocol
    posttrain eval --tasks DIR --model CKPT_DIR --approve       # ask here before rm -rf and the like
    posttrain eval report jobs/JOB
    posttrain eval compare jobs/A jobs/B
Rerunning the same command resumes the job; finished trials are not run again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from posttrain.commands.checks import existing_dir, positive, probability, writable_dir
from posttrain.errors import PosttrainError

eval_app = typer.Typer(invoke_without_command=True, no_args_is_help=False,
                       help="Evaluate a model on tasks (k samples each); report and compare jobs.")

_SET = "Job condition (recorded; refused if changed within a job)."


@eval_app.callback()
def run_eval(
    ctx: typer.Context,
    tasks: Optional[str] = typer.Option(None, "--tasks", help="Directory of Harbor task dirs "
                                        "(a broken one is skipped with a warning)."),
    manifest: Optional[str] = typer.Option(None, "--manifest", help="Validation manifest: run only the "
                                           "tasks it marks ok (docs/validate.md)."),
    model: Optional[str] = typer.Option(None, "--model", help="Checkpoint dir, or the endpoint's model name."),
    k: int = typer.Option(5, "-k", min=1, help="Samples (trials) per task."),
    jobs: int = typer.Option(4, "--jobs", "-n", min=1, help="Trials run concurrently."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", help="Environment variable holding the API key."),
    protocol: Optional[str] = typer.Option(None, help="Agent protocol over --base-url: text (token ids over "
                                           "/v1/completions; needs --model CKPT_DIR for the tokenizer) | tools. "
                                           "Default: text for a checkpoint dir, tools for a model name."),
    served_model: Optional[str] = typer.Option(None, help="Text protocol over --base-url: the endpoint's model id "
                                               "(default: the checkpoint dir's name, as `posttrain serve` reports it)."),
    job: Optional[str] = typer.Option(None, "--job", help="Job name (default: derived from the conditions)."),
    jobs_dir: str = typer.Option("jobs", help="Where job directories go."),
    sandbox: str = typer.Option("bwrap", help="Sandbox backend."),
    prices: Optional[str] = typer.Option(None, help="Price table (TOML/JSON, USD per M tokens)."),
    temperature: float = typer.Option(0.7, min=0.0, help=_SET),
    top_p: float = typer.Option(1.0, callback=probability, help=_SET),
    seed: int = typer.Option(0, help=_SET),
    max_turns: Optional[int] = typer.Option(None, min=1, help=_SET + " Default: text 6, tools 20."),
    max_reply_tokens: Optional[int] = typer.Option(None, min=1, help=_SET + " Default: text 40, tools 512."),
    command_timeout: Optional[float] = typer.Option(None, callback=positive, help=_SET + " Seconds per command."),
    agent_timeout: Optional[float] = typer.Option(None, callback=positive, help=_SET + " Default: each task's own."),
    verifier_timeout: Optional[float] = typer.Option(None, callback=positive, help=_SET + " Default: each task's own."),
    max_infra_retries: int = typer.Option(2, min=0, help=_SET),
    denominator: str = typer.Option("all", help=_SET + " all | exclude-infra."),
    context: list[str] = typer.Option([], "--context", help=_SET + " Text protocol: [DOMAIN=]POLICY, e.g. "
                                      "last_k:k=3, truncate:max_chars=800,tail_chars=300, summarise:k=2; "
                                      "repeatable (docs/agent.md)."),
    otel_endpoint: Optional[str] = typer.Option(None, help="Text protocol: send a trace per trial (a span "
                                                "per step) to this OTLP/HTTP collector, e.g. "
                                                "http://127.0.0.1:4318/v1/traces."),
    approve: bool = typer.Option(False, "--approve", help="Ask on this terminal before "
                                 "a command that an --approve-rule matches runs; a denial is the observation."),
    approve_http: Optional[str] = typer.Option(None, "--approve-http", metavar="[HOST:]PORT",
                                               help="As --approve, but pending approvals are served over "
                                               "HTTP for a UI (GET /approvals, POST /approvals/ID)."),
    approve_rule: list[str] = typer.Option([], "--approve-rule", help=_SET + " A regex searched in each "
                                           "command; repeatable. Default: rm -r/-f, curl|sh, dd, mkfs, ..."),
    approve_timeout: float = typer.Option(600.0, callback=positive, help="--approve-http: seconds a request "
                                          "waits for an answer; then it is denied."),
    approve_token_env: str = typer.Option("POSTTRAIN_APPROVAL_TOKEN", help="--approve-http: the variable "
                                          "holding the bearer token (needed off loopback)."),
    device: str = typer.Option("auto", help="A checkpoint's embedded engine: auto (a GPU where torch "
                               "sees one, else the CPU) | cpu | cuda | cuda:N (docs/gpu.md)."),
) -> None:
    """Run (or resume) an eval job: every task k times, results under JOBS_DIR/JOB."""
    if ctx.invoked_subcommand:
        return
    if not tasks or not model:
        raise PosttrainError("--tasks and --model are required (or run `posttrain eval report JOB`"
                             " / `posttrain eval compare A B`)")
    if not base_url:
        existing_dir(tasks, "--tasks")
    if otel_endpoint:
        _check_otel(otel_endpoint)
    writable_dir(jobs_dir, "--jobs-dir")
    from posttrain.devices import resolve_device

    device = str(resolve_device(device))  # chosen here: a bad name or a missing GPU stops before the job
    from posttrain.evals.approvers import open_approver
    from posttrain.evals.launch import EvalRequest, evaluate
    from posttrain.evals.table import print_summary, progress_hooks

    settings = dict(temperature=temperature, top_p=top_p, seed=seed, max_turns=max_turns,
                    max_reply_tokens=max_reply_tokens, command_timeout_s=command_timeout,
                    agent_timeout_s=agent_timeout, verifier_timeout_s=verifier_timeout,
                    max_infra_retries=max_infra_retries, denominator=denominator)
    req = EvalRequest(tasks, model, k, jobs, base_url, api_key_env, job, jobs_dir, sandbox,
                      prices, settings=settings, protocol=protocol, served_model=served_model,
                      context=list(context), otel_endpoint=otel_endpoint, manifest=manifest, device=device)
    console = Console()
    req.approver, req.approval_rules = open_approver(approve, approve_http, list(approve_rule),
                                                     approve_timeout, approve_token_env)
    if approve_http:
        console.print(f"approvals: GET/POST {req.approver.url}")
    try:    # a live bar would draw over the terminal's questions, and shows nothing in a pipe: plain lines then
        with progress_hooks(console, live=console.is_terminal and not approve) as (on_start, on_trial):
            path, summary = evaluate(req, on_start, on_trial)
    finally:
        if req.approver is not None:
            req.approver.close()
    print_summary(console, summary, path)


def _check_otel(url: str) -> None:
    from posttrain.otel import check_endpoint

    try:
        check_endpoint(url)
    except ValueError as e:
        raise PosttrainError(f"--otel-endpoint: {e}") from None


@eval_app.command("report")
def report(job: str = typer.Argument(..., help="Job directory."),
           out: Optional[str] = typer.Option(None, help="HTML path (default JOB/report.html).")) -> None:
    """Write a self-contained HTML report of a job and print its table."""
    from posttrain.evals.report import write_report
    from posttrain.evals.table import print_summary

    path, summary = write_report(Path(job), Path(out) if out else None)
    print_summary(Console(), summary, Path(job))
    Console().print(f"report: {path}")


@eval_app.command("compare")
def compare(job_a: str = typer.Argument(..., help="Job directory A."),
            job_b: str = typer.Argument(..., help="Job directory B."),
            out: Optional[str] = typer.Option(None, help="HTML path (default A/compare-B.html).")) -> None:
    """Paired comparison of two jobs on their common tasks: A - B with a CI and p-value."""
    from posttrain.evals.compare import write_comparison
    from posttrain.evals.table import print_comparison

    path, diff, result = write_comparison(Path(job_a), Path(job_b), Path(out) if out else None)
    print_comparison(Console(), diff, job_a, job_b, result)
    Console().print(f"report: {path}")


def register(app: typer.Typer) -> None:
    app.add_typer(eval_app, name="eval")
