"""`posttrain rl` with a judge model as the reward, end to end: a tiny model saved to a directory
judges the copy task's replies on the embedded engine; its calls per second and cache hit rate
are in each step's metrics and in the summary."""

import json
import re

import pytest
import torch

from posttrain.errors import ConfigError

from posttrain.models.tiny import build_tiny_model, build_tokenizer, save_policy
from posttrain.recipes.rl.run import run_rl
from posttrain.recipes.rl.config import load_rl_config


def _numeric_judge(path):
    """A tiny untrained judge whose output head names digit tokens only (the other rows are 0,
    below the best digit's logit): its greedy one-token answer is a score in [0, 9], which one
    depending on what it reads."""
    tok = build_tokenizer(["copy: rate the reply 0 1 2 3 4 5 6 7 8 9"] * 8, vocab_size=300)
    model = build_tiny_model(len(tok), seed=3, tie_word_embeddings=False)
    digits = [i for i in range(len(tok)) if tok.decode([i]).strip().isdigit()]
    with torch.no_grad():
        keep = torch.zeros(len(tok), 1)
        keep[digits] = 1.0
        model.lm_head.weight.mul_(keep)
    return save_policy(model, tok, path)


def test_a_tiny_judge_rewards_an_rl_run(tmp_path):
    judge_dir = _numeric_judge(tmp_path / "judge")
    cfg = load_rl_config(None, [
        f'runs_dir="{tmp_path}"', 'name="judged"', "threads=1", 'tasks.kind="copy"', 'tasks.reward="judge"',
        f'judge.model="{judge_dir}"', "judge.max_tokens=1", "judge.scale=9", "tasks.n_train=4",
        "tasks.n_eval=0", "tasks.max_tokens=4", "policy.sft_steps=0",
        "rollout.steps=2", "rollout.max_staleness=0", "rollout.groups_per_step=2", "rollout.group_size=3",
        "rollout.filter_zero_variance=false"])
    summary = run_rl(cfg)
    rows = [json.loads(line) for line in (tmp_path / "judged" / "metrics.jsonl").open()]
    rl = [r for r in rows if r.get("phase") == "rl"]
    assert len(rl) == 2 and all(r["judge_calls_per_s"] > 0 for r in rl)
    # each reward is the judge's digit over the scale (9): a step's rewards sum to ninths
    for r in rl:
        ninths = r["reward_mean"] * r["episodes"] * 9
        assert ninths == pytest.approx(round(ninths), abs=1e-6), r["reward_mean"]
    judge = summary["judge"]
    assert set(summary["episode_statuses"]) == {"ok"}  # every reply judged, none a judge error
    # every finished episode was judged once: asked of the judge, or answered from its cache
    judged = summary["episode_statuses"]["ok"]
    assert judged >= 12  # 2 steps of 2 groups of 3
    assert judge["judge_requests"] == pytest.approx(judged * (1 - judge["judge_cache_hit_rate"]))
    assert 0 < rl[0]["judge_requests"] < rl[-1]["judge_requests"] <= judge["judge_requests"]  # running totals


@pytest.mark.parametrize("sets, message", [
    (['tasks.kind="copy"', 'tasks.reward="judge"'], "needs a [judge] table"),
    (['tasks.kind="copy"', 'judge.model="m"'], 'read only with tasks.reward = "judge"'),
    (['tasks.kind="terminal-basics"', 'tasks.reward="judge"', 'judge.model="m"'], "rewarded by its tests")])
def test_a_judge_config_that_cannot_work_is_refused(sets, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_rl_config(None, sets)
