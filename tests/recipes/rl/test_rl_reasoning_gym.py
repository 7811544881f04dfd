"""`posttrain rl` on reasoning-gym tasks (tasks.kind = "single-turn"): the prompts carry the
dataset's question, the reward is the dataset's scorer through the scoring child, and a 2-step
run with a tiny in-process model trains and reports held-out scores."""

import json
import sys
from pathlib import Path

import pytest

from posttrain.models.tiny import build_tiny_model, save_policy
from posttrain.recipes.rl.config import load_rl_config
from posttrain.recipes.rl.env import build_env
from posttrain.recipes.rl.run import run_rl
from posttrain.tasks import suites

sys.path.insert(0, str(Path(__file__).parents[2] / "evals"))
from test_framing import chatml_tokenizer

pytestmark = pytest.mark.needs("reasoning-gym")   # tests/needs.py


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("rg")
    for split in ("train", "heldout"):
        suites.generate("reasoning-gym", root / split, 4, seed=0, split=split,
                        knobs=["dataset=chain_sum", "max_terms=3", "max_digits=2"])
    tok = chatml_tokenizer()
    checkpoint = save_policy(build_tiny_model(len(tok), seed=0), tok, root / "ckpt")
    return root / "train", root / "heldout", checkpoint


def _cfg(tmp_path, setup, *sets):
    train, held, checkpoint = (json.dumps(str(p)) for p in setup)
    return load_rl_config(None, [f"runs_dir={json.dumps(str(tmp_path / 'runs'))}",
                                 "tasks.kind='single-turn'", f"tasks.path={train}",
                                 f"tasks.eval_path={held}", f"policy.init={checkpoint}",
                                 "tasks.max_tokens=12", *sets])


def test_prompts_hold_the_question_and_the_reward_is_the_datasets(tmp_path, setup):
    env, held, _, _, _ = build_env(_cfg(tmp_path, setup), tmp_path, None)
    task = suites.generate("reasoning-gym", tmp_path / "again", 4, seed=0,
                           knobs=["dataset=chain_sum", "max_terms=3", "max_digits=2"])[0]
    prompt = env.prompts[0]
    assert task.instruction.strip() in prompt.text and len(held.prompts) == 4
    answer = json.loads(task.config.metadata["entry"])["answer"]
    assert env.reward_fn(f"<think>easy</think><answer>{answer}</answer>", prompt).value == 1.0
    assert env.reward_fn(f"<answer>{int(answer) + 1}</answer>", prompt).value == 0.0


def test_a_two_step_run_trains_and_reports_held_out_scores(tmp_path, setup):
    cfg = _cfg(tmp_path, setup, "rollout.steps=2", "rollout.group_size=2", "rollout.groups_per_step=2",
               "rollout.max_staleness=0", "rollout.filter_zero_variance=false")
    s = run_rl(cfg)
    assert s["eval_before"]["n_tasks"] == 4 and s["paired_n_tasks"] == 4
    assert 0.0 <= s["heldout_strict_before"] <= s["heldout_partial_before"] + 1e-9 <= 1.0 + 1e-9
    assert Path(s["policy"]).parent.name == "step-000002"
    assert json.loads((cfg.run_dir / "summary.json").read_text())["paired_diff"] == s["paired_diff"]
