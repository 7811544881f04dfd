"""A recipe's progress in a pipe or a file (nohup, Slurm, CI): plain lines as it goes, not a
bar that shows nothing until the end."""

import io

from rich.console import Console

from posttrain.recipes.progress import Phases


def _piped() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200), out        # a StringIO is not a terminal


def test_a_line_per_step_and_per_tenth_of_an_evaluation_while_it_runs():
    console, out = _piped()
    with Phases(console, {"rl": 3, "eval_before": 0}, coarse=("eval_before",)) as phases:
        phases.set_total("eval_before", 40)
        for _ in range(40):
            phases.advance("eval_before")
        phases.advance("rl", reward=0.25, stale=0)
        lines = out.getvalue().splitlines()                 # before the phases end
    evals = [line.split()[1] for line in lines if line.startswith("eval_before ")]
    assert evals == [f"{n}/40" for n in range(4, 41, 4)]    # every tenth, the last one included
    (rl,) = [line for line in lines if line.startswith("rl ")]
    assert rl.startswith("rl 1/3 ") and rl.endswith("reward=0.250  stale=0")


def test_a_quiet_evaluation_still_shows_it_is_alive(monkeypatch):
    from posttrain.recipes import progress

    console, out = _piped()
    clock = iter([0.0, 0.0, 30.0, 61.0, 62.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    with Phases(console, {"eval_after": 100}, coarse=("eval_after",)) as phases:
        for _ in range(3):
            phases.advance("eval_after", n=0)               # turns in which no episode finished
    assert out.getvalue().splitlines() == ["eval_after 0/100 61s"]


def test_a_terminal_still_gets_the_bar():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    with Phases(console, {"rl": 2}) as phases:
        phases.advance("rl")
    assert "rl 1/2 " not in out.getvalue() and "1/2" in out.getvalue()


COPY_RUN = ["threads=1", 'tasks.kind="copy"', "tasks.n_train=4", "tasks.n_eval=2", "tasks.max_tokens=4",
            "policy.sft_steps=0", "policy.vocab_size=300", "rollout.steps=2", "rollout.max_staleness=0",
            "rollout.groups_per_step=1", "rollout.group_size=2", "rollout.overprovision=1"]


def test_rl_piped_to_a_file_prints_each_step_and_its_evaluations(tmp_path):
    import subprocess
    import sys

    sets = sum((["--set", s] for s in [f'runs_dir="{tmp_path}"', *COPY_RUN]), [])
    r = subprocess.run([sys.executable, "-m", "posttrain.cli", "rl", *sets], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [line.split()[1] for line in lines if line.startswith("rl ")] == ["1/2", "2/2"], r.stdout
    for label in ("eval_before", "eval_after"):
        counts = [line.split()[1] for line in lines if line.startswith(f"{label} ")]
        assert counts and counts[-1] == "4/4", (label, r.stdout)         # 2 held-out prompts x 2 samples
    assert lines.index(next(x for x in lines if x.startswith("eval_after "))) > \
        lines.index(next(x for x in lines if x.startswith("rl 2/2")))
