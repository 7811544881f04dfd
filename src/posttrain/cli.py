"""The `posttrain` command line: one Typer app, each command a short recipe over the layers."""

from __future__ import annotations

import importlib
import sys

import typer
from rich.console import Console

from posttrain.errors import PosttrainError

app = typer.Typer(
    help="posttrain: post-train agentic language models on verifiable tasks.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Each module here defines register(app). Add one line per command group.
COMMAND_MODULES = [
    "posttrain.commands.sandbox",
    "posttrain.commands.quickstart",
    "posttrain.commands.tasks",
    "posttrain.commands.eval",
    "posttrain.commands.serve",
    "posttrain.commands.models",
    "posttrain.commands.rl",
    "posttrain.commands.validate",
    "posttrain.commands.gateway",
]


def _register_all() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)


def main() -> None:
    """Entry point: user errors print as one red line and exit 2, never a traceback."""
    _register_all()
    try:
        rc = app(standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else 0)
    except PosttrainError as e:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {e}", highlight=False)
        sys.exit(2)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        sys.exit(130)
    except Exception as e:  # click usage errors carry their own exit code
        import click

        if isinstance(e, click.ClickException):
            e.show()
            sys.exit(e.exit_code)
        raise


if __name__ == "__main__":
    main()
