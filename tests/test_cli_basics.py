"""CLI behaviour: --help everywhere; bad input is one line and a non-zero exit."""

import subprocess
import sys

import pytest


def _cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "posttrain.cli", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_help_on_every_command():
    from typer.main import get_command

    from posttrain import cli

    cli._register_all()
    root = get_command(cli.app)
    paths = [[]]
    for name, cmd in root.commands.items():
        paths.append([name])
        paths += [[name, sub] for sub in getattr(cmd, "commands", {})]
    for path in paths:
        r = _cli(*path, "--help")
        assert r.returncode == 0 and "Usage" in r.stdout, (path, r.stderr)


@pytest.mark.parametrize("setup, message", [
    (lambda p: None, "no such task directory"),
    (lambda p: p.mkdir(), "contains no task directories"),
])
def test_missing_or_empty_task_dir(tmp_path, setup, message):
    target = tmp_path / "tasks"
    setup(target)
    r = _cli("tasks", "oracle", str(target))
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_wrong_types_in_task_toml(tmp_path):
    assert _cli("tasks", "generate", str(tmp_path), "--n", "1").returncode == 0
    task = next(tmp_path.iterdir())
    (task / "task.toml").write_text('[verifier]\ntimeout_sec = "long"\n')
    r = _cli("tasks", "oracle", str(task))
    assert r.returncode == 2 and "verifier.timeout_sec" in r.stderr
    assert r.stderr.strip().count("\n") == 0


def test_bad_reward_file_is_reported_as_verifier_error(tmp_path):
    _cli("tasks", "generate", str(tmp_path), "--n", "1")
    task = next(tmp_path.iterdir())
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho yes > /logs/verifier/reward.txt\n")
    r = _cli("tasks", "oracle", str(task))
    assert r.returncode == 1 and "verifier_error" in r.stdout and "Traceback" not in r.stderr


@pytest.mark.parametrize("args, message", [
    (["tasks", "oracle"], "Missing argument"),                     # missing argument
    (["eval", "--tasks", "x", "--bogus"], "No such option: --bogus"),  # unknown option
    (["tasks", "generate", "out", "--n", "many"], "'--n'"),        # bad value
    (["tasks", "nonsense"], "No such command"),                    # unknown subcommand
])
def test_usage_errors_are_one_line_and_exit_2(args, message):
    r = _cli(*args)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0, r.stderr


@pytest.mark.parametrize("args", [[], ["tasks"], ["sandbox"]])
def test_no_subcommand_prints_help_and_exits_2(args):
    r = _cli(*args)
    assert r.returncode == 2 and "Usage" in r.stdout and "Traceback" not in r.stderr


def test_every_command_the_readme_tour_names_exists():
    """The README's Tour names real commands: `posttrain A [B]`, and after a ` / ` a bare `C` is
    another command of the group A (`posttrain tasks generate` / `new NAME`)."""
    from pathlib import Path

    from typer.main import get_command

    from posttrain import cli

    cli._register_all()
    root = get_command(cli.app)
    readme = Path(__file__).parents[1] / "README.md"
    tour = readme.read_text(encoding="utf-8").split("## Tour", 1)[1].split("\n\n", 2)[1]
    for cell in (row.split("|")[1].strip() for row in tour.splitlines()[2:]):
        group = None
        for piece in cell.split(" / "):
            words = piece.strip("` ").split()
            if words[0] == "posttrain":
                assert words[1] in root.commands, cell
                group = getattr(root.commands[words[1]], "commands", None)
            else:
                assert group is not None and words[0] in group, (words[0], cell)
