"""`posttrain gateway CONFIG.toml`: the serving gateway; `gateway keys new`, `audit verify`, `canary`, `replay`."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Optional

import typer
from rich.console import Console
from typer.core import TyperGroup

from posttrain.commands.checks import positive


class ServeByDefault(TyperGroup):
    """`posttrain gateway CONFIG.toml` means `posttrain gateway serve CONFIG.toml`."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["serve", *args]
        return super().parse_args(ctx, args)


gateway_app = typer.Typer(cls=ServeByDefault, no_args_is_help=True,
                          help="The serving gateway: variants, canary, fallback, limits, audit.")
audit_app = typer.Typer(no_args_is_help=True, help="The hash-chained audit log.")
keys_app = typer.Typer(no_args_is_help=True, help="API keys (stored as salted hashes).")
gateway_app.add_typer(audit_app, name="audit")
gateway_app.add_typer(keys_app, name="keys")


def _config(path: str):
    from pydantic import ValidationError

    from posttrain.errors import PosttrainError
    from posttrain.gateway.config import load_config

    try:
        return load_config(path)
    except FileNotFoundError as e:
        raise PosttrainError(f"no such config: {path}") from e
    except ValidationError as e:
        lines = [f"  {'.'.join(map(str, err['loc'])) or '(top level)'}: {err['msg'].removeprefix('Value error, ')}"
                 for err in e.errors()]
        raise PosttrainError("\n".join([f"bad gateway config {path}:", *lines])) from e
    except ValueError as e:
        raise PosttrainError(f"bad gateway config {path}: {' '.join(str(e).split())}") from e


@contextmanager
def _reaching(what: str):
    """HTTP failures while talking to `what` as one PosttrainError line, never a traceback."""
    import httpx

    from posttrain.errors import PosttrainError

    try:
        yield
    except httpx.HTTPStatusError as e:
        r = e.response
        raise PosttrainError(f"{what} answered {r.status_code} for {r.request.url}: {r.text[:200]}") from None
    except httpx.HTTPError as e:
        raise PosttrainError(f"cannot reach {what} ({type(e).__name__}: {e}); is it running?") from None


@contextmanager
def _audit_db(path: str):
    """A file that is not an SQLite audit log as one line, not a sqlite3 traceback."""
    import sqlite3

    from posttrain.errors import PosttrainError

    try:
        yield
    except sqlite3.DatabaseError as e:
        raise PosttrainError(f"{path} is not a readable audit log (SQLite): {e}") from None


def _check_port_free(host: str, port: int) -> None:
    import socket

    from posttrain.errors import PosttrainError

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        try:
            s.bind((host, port))
        except OSError as e:
            raise PosttrainError(f"cannot listen on {host}:{port}: {e.strerror} (is another gateway running? "
                                 f"pick another with --port)") from e


@gateway_app.command("serve")
def serve(config: str = typer.Argument(..., help="Gateway config (TOML)."),
          host: Optional[str] = typer.Option(None, help="Override the config's bind address."),
          port: Optional[int] = typer.Option(None, help="Override the config's port.")) -> None:
    """Serve the OpenAI API in front of the config's variants (loopback unless told otherwise)."""
    import uvicorn

    from posttrain.errors import PosttrainError
    from posttrain.gateway.app import create_app

    cfg = _config(config)
    cfg = cfg.model_copy(update={k: v for k, v in (("host", host), ("port", port)) if v is not None})
    try:
        cfg.check_exposure()
    except ValueError as e:
        raise PosttrainError(str(e)) from e
    _check_port_free(cfg.host, cfg.port)
    from posttrain.gateway.audit import AuditLocked, lock
    try:
        lock(str(cfg.audit_db)).close()
    except AuditLocked as e:
        raise PosttrainError(str(e)) from e
    Console().print(f"gateway for {', '.join(cfg.variants)} on http://{cfg.host}:{cfg.port}/v1, audit {cfg.audit_db}")
    uvicorn.run(create_app(cfg), host=cfg.host, port=cfg.port, log_level="warning",
                loop=_fastest("uvloop", "auto"), http=_fastest("httptools", "auto"), access_log=False,
                proxy_headers=False, server_header=False, backlog=4096)


def _fastest(module: str, fallback: str) -> str:
    import importlib.util

    return module if importlib.util.find_spec(module) else fallback


@audit_app.command("verify")
def audit_verify(db: str = typer.Argument(..., help="Audit log (SQLite).")) -> None:
    """Walk the hash chain; exit 1 at the first modified, inserted or deleted row."""
    from pathlib import Path

    from posttrain.errors import PosttrainError
    from posttrain.gateway.audit import verify

    if not Path(db).is_file():
        raise PosttrainError(f"no such audit log: {db}")
    with _audit_db(db):
        v = verify(db)
    if v.ok:
        Console().print(f"ok: {v.rows} rows, chain head {v.head}")
        return
    Console(stderr=True).print(f"[red]broken[/red] at row {v.first_bad_id}: {v.reason} ({v.rows} rows verified before it)")
    raise typer.Exit(1)


@keys_app.command("new")
def keys_new(name: str = typer.Argument(...),
             variants: str = typer.Option("", help="Comma-separated variants this key may use (default all)."),
             default_variant: Optional[str] = typer.Option(None),
             rpm: Optional[int] = typer.Option(None, callback=positive, help="Requests per minute."),
             tpm: Optional[int] = typer.Option(None, callback=positive, help="Tokens per minute."),
             budget_usd: Optional[float] = typer.Option(None, callback=positive, help="Spend limit in USD.")) -> None:
    """Print a new key once, and the [[keys]] block (salt and hash only) for the config."""
    from posttrain.gateway.keys import key_toml, new_key

    scope = [v for v in variants.split(",") if v]
    secret, record = new_key(name, variants=scope, default_variant=default_variant, rpm=rpm, tpm=tpm,
                             budget_usd=budget_usd)
    typer.echo(f"# the key (shown once): {secret}")
    typer.echo(key_toml(record))


DEFAULT_PROBES = ["def fib(n):\n    if n < 2:\n        return n\n", "The capital of France is", "1, 2, 3, 4, 5,",
                  "Once upon a time", "import numpy as np\nx = np.", "SELECT name FROM users WHERE"]


@gateway_app.command("canary")
def canary(config: str = typer.Argument(..., help="Gateway config with a [canary] table."),
           candidate_job: str = typer.Option(..., help="`posttrain eval` job of the candidate variant."),
           baseline_job: str = typer.Option(..., help="The same suite and conditions on the baseline variant."),
           probes: Optional[str] = typer.Option(None, help="JSON list of prompts for the greedy identity check."),
           probe_tokens: int = typer.Option(32),
           gateway_url: Optional[str] = typer.Option(None, help="A running gateway to apply the decision to."),
           api_key_env: Optional[str] = typer.Option(None, help="Env var with an admin key for --gateway-url.")) -> None:
    """Decide promotion or rollback from a paired, task-clustered non-inferiority test; audit it."""
    import json
    import os

    import httpx

    from posttrain.errors import PosttrainError
    from posttrain.gateway.audit import AuditLog
    from posttrain.gateway.canary import audit_fields, decide, differing_conditions, job_scores, probe_identity

    if api_key_env and api_key_env not in os.environ:
        raise PosttrainError(f"--api-key-env {api_key_env}: that environment variable is not set")
    cfg = _config(config)
    if not cfg.canary:
        raise PosttrainError(f"{config} has no [canary] table")
    c, variants = cfg.canary, cfg.variants
    differ = differing_conditions(candidate_job, baseline_job)
    if differ:
        raise PosttrainError(f"the two jobs ran under different conditions ({'; '.join(differ)}); "
                             "rerun one so that only the model differs")
    lossless = variants[c.candidate].lossless
    identical = None
    if lossless:
        prompts = json.loads(open(probes).read()) if probes else DEFAULT_PROBES
        cand, base = variants[c.candidate], variants[c.baseline]
        _refuse_bf16_probes(cand.backends[0], cand.model or c.candidate, base.backends[0], base.model or c.baseline)
        with _reaching("a backend of the greedy probes"):
            identical = probe_identity(cand.backends[0], cand.model or c.candidate, base.backends[0],
                                       base.model or c.baseline, prompts, probe_tokens)
    try:
        d = decide(c.candidate, c.baseline, job_scores(candidate_job), job_scores(baseline_job), c.margin,
                   lossless, identical, c.min_tasks)
    except ValueError as e:
        raise PosttrainError(str(e)) from e
    console = Console(soft_wrap=True)
    console.print(f"{c.candidate} vs {c.baseline} on {d.n_tasks} tasks: {d.mean_candidate:.4f} vs {d.mean_baseline:.4f}, "
                  f"difference {d.diff:+.4f} [{d.ci_low:+.4f}, {d.ci_high:+.4f}], p {d.p_value:.3g}, margin {c.margin}")
    if identical:
        console.print(f"greedy probes identical: {identical[0]}/{identical[1]}")
    console.print(f"[bold]{d.decision}[/bold]: {d.reason}")
    if gateway_url:
        headers = {"Authorization": f"Bearer {os.environ[api_key_env]}"} if api_key_env else {}
        with _reaching(f"the gateway at {gateway_url}"):
            r = httpx.post(f"{gateway_url.rstrip('/')}/v1/gateway/canary", json=d.to_dict(), headers=headers, timeout=30)
        if r.status_code != 200:
            raise PosttrainError(f"the gateway refused the decision: {r.status_code} {r.text}")
        console.print(f"applied to {gateway_url}: {r.json()}")
    else:  # the gateway is not running: append to its log; it applies the decision when it starts
        log = AuditLog(cfg.audit_db)
        log.append(**audit_fields(d))
        log.close()
        console.print(f"recorded in {cfg.audit_db}")
    if d.decision != "promote":
        raise typer.Exit(1)


def _refuse_bf16_probes(url_a: str, model_a: str, url_b: str, model_b: str) -> None:
    """The lossless check needs greedy outputs that repeat: refuse when a probed backend reports bf16."""
    import httpx

    from posttrain.errors import PosttrainError
    from posttrain.gateway.repeatability import backend_dtype, bf16_warning

    with httpx.Client(timeout=30) as client:
        dtypes = {url_a: backend_dtype(url_a, model_a, client), url_b: backend_dtype(url_b, model_b, client)}
    problem = bf16_warning(dtypes, "the lossless greedy check cannot be trusted")
    if problem:
        raise PosttrainError(f"refusing the canary: {problem}")


@gateway_app.command("replay")
def replay(log: str = typer.Argument(..., help="Audit log (SQLite) whose calls to re-send."),
           against: str = typer.Option(..., help="Variant to replay against."),
           gateway_url: str = typer.Option("http://127.0.0.1:8080/v1", help="The gateway that serves it."),
           limit: Optional[int] = typer.Option(None, help="Replay only the first N calls."),
           api_key_env: Optional[str] = typer.Option(None, help="Env var holding a key for the gateway."),
           json_out: Optional[str] = typer.Option(None, "--json", help="Write the report here.")) -> None:
    """Re-send logged requests (with their seeds) to a variant; report output flips and latency."""
    import json
    import os
    from pathlib import Path

    from posttrain.errors import PosttrainError
    from posttrain.gateway.replay import replay as run_replay

    if not Path(log).is_file():
        raise PosttrainError(f"no such audit log: {log}")
    key = os.environ.get(api_key_env) if api_key_env else None
    _warn_bf16(gateway_url, against)
    with _reaching(f"the gateway at {gateway_url}"), _audit_db(log):
        report = run_replay(log, gateway_url, against, limit, key).summary()
    if json_out:
        Path(json_out).write_text(json.dumps(report, indent=2))
    if report["replayed"] == report["errors"]:
        first = f": {report['first_error']}" if report.get("first_error") else ""
        raise PosttrainError(f"nothing could be replayed ({report['errors']} of {report['replayed']} calls failed{first})")
    Console(soft_wrap=True).print(f"replayed {report['replayed']} calls against {against}: {report['flips']} flips of "
                                  f"{report['comparable']} repeatable, {report['errors']} errors, latency delta p50 "
                                  f"{report['latency_delta_ms_p50']:+.1f} ms, p90 {report['latency_delta_ms_p90']:+.1f} ms")


def _warn_bf16(gateway_url: str, against: str) -> None:
    """One line on stderr when a backend of the replayed variant reports bf16 (greedy may not repeat)."""
    import httpx

    from posttrain.gateway.repeatability import bf16_warning, variant_dtypes

    with httpx.Client(timeout=30) as client:
        warning = bf16_warning(variant_dtypes(gateway_url, against, client), "flips are not all regressions")
    if warning:
        Console(stderr=True, soft_wrap=True, markup=False).print(f"warning: {warning}")


def register(app: typer.Typer) -> None:
    app.add_typer(gateway_app, name="gateway")
