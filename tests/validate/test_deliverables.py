"""Mutants aimed at deliverables: only files the oracle created or changed and the verifier
reads are mutated (never an input the task ships, never the oracle's helper script); each
surviving mutant carries the deliverable, how it was changed, the diff and why it counts; a
task whose verifier reads no oracle output gets command mutants whose survivors do not count."""

import os
from types import SimpleNamespace

import pytest
import typer
from typer.testing import CliRunner

from posttrain.agent.trial import open_task_sandbox
from posttrain.commands import validate as validate_command
from posttrain.tasks import read_task
from posttrain.tasks.suites.terminal_tools import suite as terminal_tools
from posttrain.validate import deliverables, mutation, reads
from posttrain.validate.config import ValidateConfig
from posttrain.validate.html import render
from posttrain.validate.manifest import manifest_dict
from posttrain.validate.runner import validate_dirs
from posttrain.validate.runs import Attempt

from defective import GOOD_CHECK, REWARD_EVERY_PATH, write_base_task

CFG = ValidateConfig(oracle_runs=1, determinism_runs=1)
DOCKER_BASE = os.environ.get("POSTTRAIN_DOCKER_IMAGE", "posttrain/bookworm:latest")
# The oracle writes a helper, runs it, and leaves it behind; the tests read the shipped
# input (a note) and the answer.
HELPER = {
    "solution/solve.sh": ("#!/bin/bash\ncat > /app/solve.py <<'EOF'\n"
                          "print(sum(int(x) for x in open('/app/input.txt')))\nEOF\n"
                          "python3 /app/solve.py > /app/answer.txt\necho done\n"),
    "environment/app/note.txt": "keep me\n",
}
READS_NOTE = "grep -q keep /app/note.txt && "


def _mutation(tmp_path, name: str, files: dict, cfg=CFG):
    [report] = validate_dirs([write_base_task(tmp_path / "tasks", name, files)], cfg, tmp_path / "st")
    return report, report.checks["mutation"]


def test_a_format_only_verifier_is_weak_with_evidence(tmp_path):
    check = READS_NOTE + "grep -qxE '[0-9]+' /app/answer.txt"
    files = HELPER | {"tests/test.sh": REWARD_EVERY_PATH.format(check=check)}
    report, m = _mutation(tmp_path, "format", files)
    ev = m.evidence
    assert report.status == "weak-verifier", report.reasons
    assert ev["mode"] == "deliverables" and ev["deliverables"] == ["/app/answer.txt"]
    assert ev["trace"] == "atime trace"
    assert {r["name"].split()[1] for r in ev["results"]} == {"/app/answer.txt"}   # no solve.py, no note
    survivor = next(s for s in ev["survivors"] if s["kind"] == "change_value")
    assert survivor["deliverable"] == "/app/answer.txt"
    assert "-60" in survivor["diff"] and "+70" in survivor["diff"]
    assert "created /app/answer.txt and the verifier reads it" in survivor["why"]
    assert "answer.txt" in m.reason and "change one value" in m.reason
    page = render(manifest_dict([report], CFG.model_dump()))
    assert "surviving mutants (2)" in page and "+70" in page and "why it counts" in page


def test_a_sound_verifier_kills_every_deliverable_mutant(tmp_path):
    check = READS_NOTE + GOOD_CHECK
    files = HELPER | {"tests/test.sh": REWARD_EVERY_PATH.format(check=check)}
    report, m = _mutation(tmp_path, "sound", files)
    assert report.status == "ok", report.reasons
    assert m.evidence["strength"] == 1.0 and m.evidence["mutants"] == 3
    assert [r["name"] for r in m.evidence["results"]] == [
        "change_value /app/answer.txt", "truncate /app/answer.txt", "remove /app/answer.txt"]


def test_an_edited_file_is_reverted_and_its_edit_changed(tmp_path):
    files = {"environment/app/calc.sh": "# version 1\necho $((2 - 3))\n",
             "solution/solve.sh": "#!/bin/bash\nsed -i 's/2 - 3/2 + 3/' /app/calc.sh\n",
             "tests/test.sh": REWARD_EVERY_PATH.format(check='[ "$(bash /app/calc.sh)" = 5 ]')}
    _, m = _mutation(tmp_path, "edit", files)
    assert [r["name"] for r in m.evidence["results"]] == [
        "change_value /app/calc.sh", "truncate /app/calc.sh", "revert /app/calc.sh"]
    assert m.evidence["killed"] == 3


def test_changed_value_aims_at_the_oracles_edit_never_a_comment_or_docstring():
    aim = deliverables._change_aimed
    shipped = b"# version 1\necho $((2 - 3))\n"
    edited = b"# version 1\necho $((2 + 3))\n"
    assert aim("/app/calc.sh", edited, shipped) == b"# version 1\necho $((3 + 3))\n"
    assert aim("/app/new.sh", b"# step 1\nexit 4\n", None) == b"# step 1\nexit 5\n"
    py = b'def f(x):\n    """>>> f(1)\n    2"""\n    return x * 2  # 1\n'
    assert aim("/app/f.py", py, None) == py.replace(b"x * 2", b"x * 3")
    ops = b'def g(a, b):\n    """Say 3."""\n    return a < b\n'
    assert aim("/app/g.py", ops, None) == ops.replace(b"a < b", b"a >= b")
    helper = b"def enc(s):\n    return shift(s, 26)\n\ndef dec(s):\n    return shift(s, -5)\n"
    given = "Given:\ndef enc(s):\n    return shift(s, 26)\nWrite dec."
    assert aim("/app/h.py", helper, None, given) == helper.replace(b"-5", b"-6")
    no_value = b'def f(s):\n    """ \n    Words only.\n    """\n    return sorted(s)\n'
    assert aim("/app/n.py", no_value, None) == no_value      # no mutant, never a docstring edit
    assert aim("/app/t.py", b"ok = a and b\n", None) == b"ok = a or b\n"


def test_plan_is_round_robin_within_the_budget():
    before = {"/app/old.txt": "h0"}
    plan = deliverables.plan(["/app/new.txt", "/app/old.txt"], before, 5)
    assert plan == [("change_value", "/app/new.txt"), ("change_value", "/app/old.txt"),
                    ("truncate", "/app/new.txt"), ("truncate", "/app/old.txt"),
                    ("remove", "/app/new.txt")]
    after = {"/app/old.txt": "h1", "/app/new.txt": "h2", "/app/d": "d", "/app/l": "l:/etc",
             "/tmp/scratch": "h3"}
    assert deliverables.find(before, after, ["/app/new.txt", "/app/old.txt"]) == [
        "/app/old.txt", "/app/new.txt"]


def test_a_verifier_reading_no_oracle_output_gets_uncounted_command_mutants(tmp_path):
    files = {"solution/solve.sh": "#!/bin/bash\ntouch /app/done\necho finished\n",
             "instruction.md": "Create the file /app/done.\n",
             "tests/test.sh": REWARD_EVERY_PATH.format(check="[ -e /app/done ]")}
    _, m = _mutation(tmp_path, "exists", files)
    ev = m.evidence
    assert ev["mode"] == "commands" and ev["deliverables"] == []
    by_name = {r["name"]: r for r in ev["results"]}
    assert by_name["drop line 2: touch /app/done"]["killed"]
    assert not by_name["drop line 3: echo finished"]["killed"]
    assert ev["strength"] == 1.0 and ev["survivors"] == []


def test_the_budget_caps_the_mutants(tmp_path):
    check = READS_NOTE + "grep -qxE '[0-9]+' /app/answer.txt"
    cfg = ValidateConfig(oracle_runs=1, determinism_runs=1, max_mutants=1)
    files = HELPER | {"tests/test.sh": REWARD_EVERY_PATH.format(check=check)}
    _, m = _mutation(tmp_path, "budget", files, cfg)
    assert [r["name"] for r in m.evidence["results"]] == ["change_value /app/answer.txt"]
    off = ValidateConfig(oracle_runs=1, determinism_runs=1, max_mutants=0)
    _, m = _mutation(tmp_path / "off", "budget", HELPER, off)
    assert m.passed is None and "budget is 0" in m.reason


@pytest.mark.parametrize("value", ["-1", "65"])
def test_the_budget_flag_is_validated(tmp_path, value):
    app = typer.Typer()
    validate_command.register(app)
    app.command("other")(lambda: None)      # two commands: typer keeps the command name
    result = CliRunner().invoke(app, ["validate", str(tmp_path), "--mutation-budget", value])
    assert result.exit_code == 2 and "--mutation-budget" in result.output


def _trace_sees_reads_not_stats(tmp_path, backend: str):
    task = read_task(write_base_task(tmp_path, "trace", {}))
    with open_task_sandbox(task, backend) as sb:
        for name in ("read.txt", "stat.txt", "idle.txt"):
            (sb.host_path("/app") / name).write_text("x\n")
        sb.give(sb.host_path("/app"))
        traced = reads.start(sb, ["/app/read.txt", "/app/stat.txt", "/app/idle.txt"])
        sb.exec("cat /app/read.txt >/dev/null; test -e /app/stat.txt; ls -l /app >/dev/null")
        assert reads.finish(sb, traced) == ["/app/read.txt"]


def test_the_atime_trace_sees_reads_not_stats_bwrap(tmp_path):
    _trace_sees_reads_not_stats(tmp_path, "bwrap")


@pytest.mark.slow
def test_the_atime_trace_sees_reads_not_stats_docker(tmp_path, docker_engine, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_DOCKER_BASE_MAP", f"ubuntu={DOCKER_BASE}")
    _trace_sees_reads_not_stats(tmp_path, "docker")


GIT_AFTER = {f"/app/project/.git/{p}": "h" for p in (
    "index", "config", "HEAD", "description", "COMMIT_EDITMSG", "logs/HEAD", "logs/refs/heads/main",
    "refs/heads/main", "info/exclude", "hooks/pre-commit.sample", "objects/b3/62f4fe")}


def test_gits_bookkeeping_is_never_a_deliverable(monkeypatch):
    """A verifier that copies .git whole reads every file in it; git answers from the index,
    config, HEAD, refs and objects only, so the rest (description, reflogs, sample hooks, ...)
    would give mutants that survive any sound verifier."""
    content = ["/app/project/.git/" + p
               for p in ("index", "config", "HEAD", "refs/heads/main", "objects/b3/62f4fe")]
    assert deliverables.find({}, GIT_AFTER, list(GIT_AFTER)) == content
    probe = Attempt(before={}, after=GIT_AFTER, reads=None)     # a mount without atimes
    monkeypatch.setattr(mutation, "referenced_paths", lambda _task: ["/app/project/.git"])
    named = "named in the tests (no atime trace on this mount)"
    assert mutation._deliverables(SimpleNamespace(), probe) == (content, named)


def test_a_git_commits_task_validates_ok_without_an_atime_trace(tmp_path, monkeypatch):
    """terminal-tools' git-commits (seed 0), its deliverables found from the paths its tests
    name (all of /app/project/.git): none of git's bookkeeping is mutated, and it is `ok`."""
    monkeypatch.setattr(reads, "atime_works", lambda _sandbox: False)
    task = next(t for t in terminal_tools.generate(tmp_path / "suite", 6, seed=0)
                if t.config.metadata["family"] == "git-commits")
    [report] = validate_dirs([task.path], CFG, tmp_path / "st")
    ev = report.checks["mutation"].evidence
    assert ev["trace"] == "named in the tests (no atime trace on this mount)" and ev["deliverables"]
    assert not [p for p in ev["deliverables"] if deliverables.INERT_GIT.search(p)]
    assert report.status == "ok", report.reasons
