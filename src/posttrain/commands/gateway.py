"""`posttrain gateway CONFIG.toml`: the serving gateway; `gateway keys new`, `audit verify`, `canary`, `replay`."""

from __future__ import annotations

from typing import Optional

import typer
from rich.console import Console
from typer.core import TyperGroup


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
    except (ValidationError, ValueError) as e:
        raise PosttrainError(f"bad gateway config {path}: {' '.join(str(e).split())}") from e


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
             rpm: Optional[int] = typer.Option(None), tpm: Optional[int] = typer.Option(None),
             budget_usd: Optional[float] = typer.Option(None)) -> None:
    """Print a new key once, and the [[keys]] block (salt and hash only) for the config."""
    from posttrain.gateway.keys import key_toml, new_key

    scope = [v for v in variants.split(",") if v]
    secret, record = new_key(name, variants=scope, default_variant=default_variant, rpm=rpm, tpm=tpm,
                             budget_usd=budget_usd)
    typer.echo(f"# the key (shown once): {secret}")
    typer.echo(key_toml(record))


def register(app: typer.Typer) -> None:
    app.add_typer(gateway_app, name="gateway")
