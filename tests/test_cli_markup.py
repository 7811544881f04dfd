"""Errors and help are printed as written: brackets such as '.[ray]' and [canary] survive."""

import subprocess
import sys

from posttrain import cli
from posttrain.errors import PosttrainError

HINT = "needs Ray: pip install -c constraints.txt -e '.[ray]'; add [[keys]] or a [canary] table"


def test_error_message_keeps_its_brackets(capfd, monkeypatch):
    cli._register_all()

    @cli.app.command("raise-hint", hidden=True)
    def raise_hint() -> None:
        raise PosttrainError(HINT)

    monkeypatch.setattr(sys, "argv", ["posttrain", "raise-hint"])
    try:
        assert cli._run() == 2
    finally:
        cli.app.registered_commands.pop()
    assert HINT in capfd.readouterr().err


def test_help_keeps_brackets():
    r = subprocess.run([sys.executable, "-m", "posttrain.cli", "gateway", "canary", "--help"],
                       capture_output=True, text=True, timeout=120)
    assert "[canary] table" in r.stdout
