"""The reasoning-gym suite: tasks of several datasets whose oracle replies score 1.0 and wrong
ones less, the partial agent and the probe, knobs passed to the dataset's config, disjoint
splits, one-line errors, hostile replies that run nothing and earn nothing, a hanging reply cut
off, `posttrain validate`, and the CLI's generate, list and oracle."""

import json
import subprocess
import sys

import pytest

from posttrain.errors import PosttrainError
from posttrain.tasks import load_tasks
from posttrain.tasks.suites import generate, score_reply
from posttrain.validate.config import ValidateConfig
from posttrain.validate.runner import validate_task
from posttrain.validate.state import CheckStore

pytestmark = pytest.mark.needs("reasoning-gym")   # tests/needs.py

DATASETS = ("chain_sum", "leg_counting", "basic_arithmetic")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("rg")
    return {d: generate("reasoning-gym", root / d, 3, seed=0, knobs=[f"dataset={d}"]) for d in DATASETS}


def _gen(path, n=3, seed=0, split="train", **knobs):
    return generate("reasoning-gym", path, n, seed=seed, split=split,
                    knobs=[f"{k}={v}" for k, v in knobs.items()])


def _reply(answer) -> str:
    return f"<answer>{answer}</answer>"


def _entry(task) -> dict:
    return json.loads(task.config.metadata["entry"])


def test_oracles_score_one_and_wrong_answers_less(made):
    for dataset, tasks in made.items():
        for task in load_tasks(tasks[0].path.parent):
            meta = task.config.metadata
            assert meta["kind"] == "single-turn" and meta["domain"] == f"reasoning-gym/{dataset}"
            assert _entry(task)["question"].strip() in task.instruction and "<answer>" in task.instruction
            reward, details = score_reply(meta, task.oracle_reply())
            assert (reward, details["strict"]) == (1.0, 1.0), task.id
            wrong = _reply(int(_entry(task)["answer"]) + 1)
            assert score_reply(meta, wrong)[0] < 1.0, (task.id, wrong)
            assert score_reply(meta, _entry(task)["answer"])[0] < 1.0     # no tags: no answer


def test_the_partial_agent_earns_partial_credit_and_the_probe_little(made):
    from posttrain.tasks.suites.rgym.probes import PARTIAL, PROBES

    partial = [score_reply(t.config.metadata, PARTIAL["answer_in_a_sentence"](t))[0]
               for t in made["leg_counting"]]      # the default scorer: containment credit
    assert all(0.0 < s < 1.0 for s in partial), partial
    for task in (t for tasks in made.values() for t in tasks):
        assert score_reply(task.config.metadata, PROBES["question_in_tags"](task))[0] <= 0.5, task.id


def test_knobs_reach_the_dataset_config(tmp_path):
    tasks = _gen(tmp_path / "five", dataset="chain_sum", min_terms=5, max_terms=5, allow_negation="true")
    assert {_entry(t)["metadata"]["num_terms"] for t in tasks} == {5}
    meta = tasks[0].config.metadata
    assert json.loads(meta["config"])["allow_negation"] is True and "max_terms=5" in meta["difficulty"]
    assert all(score_reply(t.config.metadata, t.files["solution/reply.md"])[0] == 1.0 for t in tasks)


def test_generation_is_deterministic_and_splits_and_seeds_are_disjoint(tmp_path):
    def draw(name, seed, split="train"):
        tasks = _gen(tmp_path / name, 8, seed, split, dataset="basic_arithmetic")
        seeds = {json.loads(t.config.metadata["config"])["seed"] + t.config.metadata["index"] for t in tasks}
        return tasks, seeds, {_entry(t)["question"] for t in tasks}

    train, train_seeds, train_qs = draw("train", 0)
    again, _, _ = draw("again", 0)
    assert [(t.id, t.instruction, t.config.metadata) for t in again] == \
        [(t.id, t.instruction, t.config.metadata) for t in train]
    for name, seed, split in (("seed1", 1, "train"), ("held", 0, "heldout"), ("held1", 1, "heldout")):
        other, seeds, qs = draw(name, seed, split)
        assert not seeds & train_seeds and not qs & train_qs, name
        assert all(t.id.startswith(f"{split}-") for t in other)


@pytest.mark.parametrize("knobs, message", [
    ([], "--knob dataset=NAME"),
    (["max_terms=3"], "knobs given: max_terms"),
    (["dataset=chain_sums"], "did you mean chain_sum"),
    (["dataset=nope"], "reasoning_gym.factory.DATASETS"),
    (["dataset=chain_sum", "colour=red"], "colour is not a knob of chain_sum"),
    (["dataset=chain_sum", "max_terms=lots"], "max_terms='lots'"),
    (["dataset=chain_sum", "min_terms=9", "max_terms=2"], "max_terms must be >= min_terms"),
    (["dataset=rush_hour"], "gives no answer to its entries"),
    (["dataset=rearc"], "only 0 of its first 8 entries score 1.0"),
])
def test_bad_knobs_are_one_line_errors(tmp_path, knobs, message):
    with pytest.raises(PosttrainError, match=message) as e:
        generate("reasoning-gym", tmp_path / "x", 2, seed=0, knobs=knobs)
    assert "\n" not in str(e.value)
    assert not any(p for p in (tmp_path / "x").iterdir() if not p.name.startswith("."))


def _library_scores_in_a_plain_process(dataset: str, task, answer: str) -> float:
    """The dataset's scorer called directly, with no guard (a throwaway process)."""
    code = ("import json, sys, reasoning_gym as rg; m = json.loads(sys.argv[1]); "
            "ds = rg.create_dataset(m['dataset'], **json.loads(m['config'])); "
            "print(ds.score_answer(sys.argv[2], json.loads(m['entry'])))")
    r = subprocess.run([sys.executable, "-c", code, json.dumps(task.config.metadata), answer],
                       check=False, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return float(r.stdout)


@pytest.mark.parametrize("dataset, payload", [
    ("countdown", "__import__('os').system('touch {marker}')"),           # sympy's parse_expr
    ("n_queens", "open('{marker}', 'w').write('x')"),                     # a plain eval()
])
def test_a_hostile_reply_runs_nothing_and_scores_zero(tmp_path, dataset, payload):
    task = _gen(tmp_path / dataset, 1, dataset=dataset)[0]
    shown, guarded = tmp_path / "unguarded", tmp_path / "guarded"
    _library_scores_in_a_plain_process(dataset, task, payload.format(marker=shown))
    assert shown.exists()            # the dataset's own scorer does run it
    reward, details = score_reply(task.config.metadata, _reply(payload.format(marker=guarded)))
    assert not guarded.exists() and reward == 0.0 and details["refused"] == 1.0
    assert score_reply(task.config.metadata, task.files["solution/reply.md"])[0] == 1.0  # still serving


def test_a_reply_that_reads_a_file_outside_the_interpreter_is_refused(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("a secret")
    task = _gen(tmp_path / "q", 1, dataset="n_queens")[0]
    reward, details = score_reply(task.config.metadata, _reply(f"open({str(secret)!r}).read()"))
    assert reward == 0.0 and details["refused"] == 1.0


def test_the_guard_finds_dunders_in_source_text_and_in_syntax_trees():
    import ast

    from posttrain.tasks.suites.rgym.worker import has_dunder

    for hostile in ("().__class__", b"__import__('os')", ast.parse("x.__class__"),
                    ast.parse("getattr(x, '__globals__')"), ast.parse("import os as __o"), ast.parse("b'__x'")):
        assert has_dunder(hostile), hostile
    for plain in ("6*(98 - 54) - 34", b"[1, 2]", ast.parse("Integer(94) * Symbol('x')"), None):
        assert has_dunder(plain) == (plain is None), plain      # an unknown kind is refused


def test_a_hanging_reply_is_cut_off_with_reward_zero(tmp_path, monkeypatch):
    from posttrain.tasks.suites.rgym import child

    monkeypatch.setattr(child, "REPLY_TIMEOUT_S", 1.0)
    task = _gen(tmp_path / "c", 1, dataset="countdown")[0]
    hung = child.CHILD.child.proc
    reward, details = score_reply(task.config.metadata, _reply("9**9**9**9"))
    assert (reward, details["timeout"]) == (0.0, 1.0) and hung.poll() is not None   # killed
    assert score_reply(task.config.metadata, task.files["solution/reply.md"])[0] == 1.0  # a new child


def test_a_reply_past_its_cpu_seconds_ends_the_child_without_the_parent(tmp_path, monkeypatch):
    """The child's own cap: it dies of SIGXCPU with no kill from the parent (which waits longer)."""
    import signal

    from posttrain.tasks.suites.rgym import child

    monkeypatch.setattr(child, "REPLY_TIMEOUT_S", 60.0)
    monkeypatch.setattr(child, "REPLY_CPU_S", 1)
    task = _gen(tmp_path / "c", 1, dataset="countdown")[0]
    hung = child.CHILD.child.proc
    reward, details = score_reply(task.config.metadata, _reply("9**9**9**9"))
    assert (reward, details["timeout"]) == (0.0, 1.0) and hung.returncode == -signal.SIGXCPU


def _verdict(task_dir, tmp_path):
    cfg = ValidateConfig(oracle_runs=2, determinism_runs=1)
    return validate_task(task_dir, cfg, CheckStore(tmp_path / "state", cfg.digest()))


def test_validate_passes_generated_tasks_and_catches_a_wrong_oracle(tmp_path, made):
    for dataset in DATASETS:
        report = _verdict(made[dataset][0].path, tmp_path)
        assert report.status == "ok", (dataset, report.reasons)
    bad = _gen(tmp_path / "bad", 1, dataset="leg_counting")[0]
    (bad.path / "solution/reply.md").write_text(_reply(int(_entry(bad)["answer"]) + 1))
    report = _verdict(bad.path, tmp_path)
    assert report.status == "broken" and "oracle" in report.reasons[0]


def test_cli_generates_lists_and_runs_oracles(tmp_path):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "posttrain.cli", *map(str, args)],
                              check=False, capture_output=True, text=True, timeout=120)
    out = tmp_path / "t"
    r = cli("tasks", "generate", out, "--suite", "reasoning-gym", "--n", "3", "--split", "heldout",
            "--knob", "dataset=leg_counting", "--knob", "max_animals=4")
    assert r.returncode == 0 and "wrote 3 tasks" in r.stdout, r.stderr
    r = cli("tasks", "list", out)
    assert r.returncode == 0 and r.stdout.count("reasoning-gym/leg_counting") == 3, r.stdout + r.stderr
    assert "max_animals=4" in r.stdout and "3 tasks" in r.stdout
    r = cli("tasks", "oracle", out)
    assert r.returncode == 0 and r.stdout.count(" ok ") == 3, r.stdout + r.stderr
