"""The `posttrain` command line: one Typer app, each command a short recipe over the layers."""

from __future__ import annotations

import importlib
import signal
import sys

import typer
from rich.console import Console
from rich.markup import escape

from typer.exceptions import TyperException

from posttrain.errors import PosttrainError, Terminated

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
    "posttrain.commands.plan",
    "posttrain.commands.gateway",
]


def _register_all() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)
    _plain_help(app)


def _plain_help(typer_app: typer.Typer) -> None:
    """Help as written: no rich markup, so `'.[ray]'` and `[[keys]]` are printed, not eaten."""
    typer_app.rich_markup_mode = None
    for group in typer_app.registered_groups:
        _plain_help(group.typer_instance)


def print_error(message: str) -> None:
    """One red `error:` line on stderr; the message itself is printed literally (brackets kept)."""
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {escape(message)}", highlight=False)


def _usage_error(e) -> int:
    """One line for a usage error; the help text when no command was given."""
    ctx = getattr(e, "ctx", None)
    if type(e).__name__ == "NoArgsIsHelpError" and ctx is not None:
        print(ctx.get_help())
        return 2
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    print_error(f"{e.format_message()}{hint}")
    return getattr(e, "exit_code", 2)


def _run() -> int:
    """The app's exit status; user errors print as one red line and give 2, never a traceback."""
    try:
        rc = app(standalone_mode=False)        # typer returns 130 for an interrupt here
        return rc if isinstance(rc, int) else 0
    except PosttrainError as e:
        print_error(str(e))
        return 2
    except typer.Exit as e:
        return e.exit_code
    except (typer.Abort, KeyboardInterrupt):
        return 130
    except TyperException as e:  # usage errors of typer's bundled click
        return _usage_error(e)


def main() -> None:
    """Entry point. SIGTERM unwinds like Ctrl-C (sandboxes and child processes closed) and
    exits 143, as a process killed by SIGTERM would."""
    terminated = []

    def on_sigterm(signum, frame) -> None:
        terminated.append(signum)
        raise Terminated()

    signal.signal(signal.SIGTERM, on_sigterm)
    _register_all()
    rc = _run()
    sys.exit(143 if terminated else rc)


if __name__ == "__main__":
    main()
