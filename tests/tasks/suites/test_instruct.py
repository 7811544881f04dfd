"""The instruct suite: deterministic generation, held-out splits disjoint by base request and by
combination, each constraint family met by its oracle and missed by the plain reply, every
generated oracle solved, no-op, echo and parroting low, `posttrain validate` verdicts, the CLI
and the single-turn prompts with their reward."""

import json
import random
import subprocess
import sys

import pytest

from posttrain.errors import PosttrainError
from posttrain.rollout.single_turn import REWARDS, reply_score, task_prompts
from posttrain.tasks import load_tasks
from posttrain.tasks.suites import generate, score_reply
from posttrain.types import Reward
from posttrain.validate.config import ValidateConfig
from posttrain.validate.runner import validate_task
from posttrain.validate.state import CheckStore

try:   # the instruct extra (if-verifiable, langdetect); without it: deselected, tests/needs.py
    from posttrain.tasks.suites.instruct.families import FAMILIES
    from posttrain.tasks.suites.instruct.probes import named_words
    from posttrain.tasks.suites.instruct.requests import HELDOUT, plain_reply, requests
    from posttrain.tasks.suites.instruct.score import score
    from posttrain.tasks.suites.instruct.suite import oracle_reply
except ImportError:
    FAMILIES = {}

pytestmark = pytest.mark.needs("instruct")   # tests/needs.py


@pytest.fixture(scope="module")
def train(tmp_path_factory):
    return generate("instruct", tmp_path_factory.mktemp("instruct") / "train", 60, seed=1)


@pytest.fixture(scope="module")
def heldout(tmp_path_factory):
    return generate("instruct", tmp_path_factory.mktemp("instruct") / "held", 40, seed=2, split="heldout")


def _digest(tasks):
    return [(t.id, t.instruction, t.files["solution/reply.md"], t.config.metadata) for t in tasks]


def test_generation_is_deterministic_per_seed(tmp_path, train):
    again = generate("instruct", tmp_path / "a", 60, seed=1)
    assert _digest(again) == _digest(train)
    other = generate("instruct", tmp_path / "b", 60, seed=5)
    assert _digest(other) != _digest(train)


def test_heldout_is_disjoint_by_request_and_by_combination(train, heldout):
    meta = lambda tasks: [t.config.metadata for t in tasks]  # noqa: E731
    assert not {m["request"] for m in meta(train)} & {m["request"] for m in meta(heldout)}
    assert all(m["request"].split("-", 1)[1] in HELDOUT for m in meta(heldout))
    combos = lambda tasks: {m["family"] for m in meta(tasks) if len(m["families"]) > 1}  # noqa: E731
    assert combos(train) and combos(heldout) and not combos(train) & combos(heldout)
    assert {len(m["families"]) for m in meta(train)} == {1, 2, 3}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_has_a_passing_and_a_failing_reply(family):
    request = next(r for r in requests("train") if r.id == "note-garden")
    fam = FAMILIES[family]
    oracle, kwargs = oracle_reply(request, [family], [fam.draw(random.Random(0), request)])
    constraints = [{"id": fam.checker, "kwargs": kwargs[0]}]
    assert score(constraints, oracle).strict, oracle
    assert not score(constraints, plain_reply(request)).strict


def test_every_generated_oracle_is_solved_from_disk(train, heldout):
    for task in load_tasks(train[0].path.parent) + load_tasks(heldout[0].path.parent):
        reward, details = score_reply(task.config.metadata, task.oracle_reply())
        assert (reward, details["strict"]) == (1.0, 1.0), task.id


def test_noop_echo_and_parroting_score_low(train):
    for task in train:
        constraints = task.config.metadata["constraints"]
        assert score(constraints, "").partial == 0.0
        for hack in (task.instruction, named_words(constraints)):
            s = score(constraints, hack)
            assert not s.strict and s.partial <= 0.5, (task.id, hack)


def test_partial_reply_gets_partial_credit(train):
    from posttrain.tasks.suites.instruct.probes import PARTIAL

    scores = [score_reply(t.config.metadata, PARTIAL["first_only"](t))[0] for t in train
              if len(t.config.metadata["families"]) > 1]
    assert scores and any(0.0 < s < 1.0 for s in scores), scores


def test_knobs_and_splits_are_checked(tmp_path):
    with pytest.raises(PosttrainError, match="families"):
        generate("instruct", tmp_path / "x", 2, seed=0, knobs=["families=nope"])
    with pytest.raises(PosttrainError, match="split"):
        generate("instruct", tmp_path / "y", 2, seed=0, split="test")
    four = {"no_comma", "lowercase", "end", "postscript"}
    only = generate("instruct", tmp_path / "z", 6, seed=0, knobs=[f"families={','.join(sorted(four))}",
                                                                  "min_constraints=2", "max_constraints=2"])
    assert all(len(t.config.metadata["families"]) == 2 for t in only)
    assert {f for t in only for f in t.config.metadata["families"]} <= four


def _verdict(task_dir, tmp_path):
    cfg = ValidateConfig(oracle_runs=2, determinism_runs=1)
    return validate_task(task_dir, cfg, CheckStore(tmp_path / "state", cfg.digest()))


def test_validate_passes_generated_tasks_and_catches_bad_ones(tmp_path, train):
    for task in train[:4]:
        report = _verdict(task.path, tmp_path)
        assert report.status == "ok", report.reasons
    bad = generate("instruct", tmp_path / "bad", 2, seed=9)
    (bad[0].path / "solution/reply.md").write_text("OK.")         # an oracle that ignores them
    report = _verdict(bad[0].path, tmp_path)
    assert report.status == "broken" and "oracle" in report.reasons[0]
    toml = bad[1].path / "task.toml"                               # a constraint the echo meets
    text = toml.read_text()
    meta_start = text.index("constraints = ")
    line_end = text.index("\n", meta_start)
    word = bad[1].instruction.split()[0]
    kw = f'[{{id = "keywords:existence", kwargs = {{keywords = ["{word}"]}}}}]'
    toml.write_text(text[:meta_start] + "constraints = " + kw + text[line_end:])
    (bad[1].path / "solution/reply.md").write_text(f"{word}.")
    report = _verdict(bad[1].path, tmp_path)
    assert report.status == "hackable", report.reasons
    assert "echo_instruction" in report.checks["hacks"].evidence["raised"]


def test_cli_generates_lists_and_runs_oracles(tmp_path):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "posttrain.cli", *map(str, args)],
                              capture_output=True, text=True, timeout=120)
    r = cli("tasks", "generate", tmp_path / "t", "--suite", "instruct", "--n", "5", "--split", "heldout")
    assert r.returncode == 0 and "wrote 5 tasks" in r.stdout, r.stderr
    r = cli("tasks", "oracle", tmp_path / "t")
    assert r.returncode == 0 and r.stdout.count(" ok ") == 5, r.stdout + r.stderr


def test_task_prompts_carry_the_reward(train):
    prompts = task_prompts(train[:3])
    assert [p.id for p in prompts] == [t.id for t in train[:3]]
    assert train[0].instruction.strip() in prompts[0].text
    assert json.loads(prompts[0].target)["constraints"] == train[0].config.metadata["constraints"]
    assert REWARDS["reply"](train[0].files["solution/reply.md"], prompts[0]).value == 1.0
    assert reply_score("", prompts[0]) == Reward(0.0, {"strict": 0.0} | {
        f"met:{f}": 0.0 for f in train[0].config.metadata["families"]})


def test_sandbox_paths_refuse_single_turn_tasks(tmp_path, train):
    from posttrain.errors import ConfigError, TaskError
    from posttrain.evals.launch import read_tasks
    from posttrain.recipes.rl.domains import sandbox_tasks
    from posttrain.recipes.rl.config import load_rl_config

    root = train[0].path.parent
    with pytest.raises(TaskError, match="single-turn"):
        read_tasks(str(root))
    cfg = load_rl_config(None, ["tasks.kind=dir", f"tasks.path={json.dumps(str(root))}", "tasks.n_eval=0"])
    with pytest.raises(ConfigError, match="single-turn"):
        sandbox_tasks(cfg, tmp_path)
