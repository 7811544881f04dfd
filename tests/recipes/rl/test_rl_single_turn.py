"""`posttrain rl` on single-turn task directories (tasks.kind = "single-turn"): the envs in the
checkpoint's chat template, one-line config errors, a group's shared prefill, and a short run
end to end with a tiny in-process model: held-out scores, paired difference, report, HF policy."""

import json
import sys
from pathlib import Path

import pytest

from posttrain.engine.paged.local import LocalEngine
from posttrain.errors import ConfigError
from posttrain.models.tiny import build_tiny_model, save_policy
from posttrain.recipes.rl.run import run_rl
from posttrain.recipes.rl.config import load_rl_config
from posttrain.recipes.rl.env import build_env
from posttrain.schedule.sampler import GroupJob
from posttrain.tasks import suites

sys.path.insert(0, str(Path(__file__).parents[2] / "evals"))
from test_framing import chatml_tokenizer  # noqa: E402

pytestmark = pytest.mark.needs("instruct")   # the suite's checker (tests/needs.py)


@pytest.fixture(scope="module")
def splits(tmp_path_factory):
    root = tmp_path_factory.mktemp("instruct")
    for split in ("train", "heldout"):
        suites.generate("instruct", root / split, 4, seed=0, split=split)
    return root / "train", root / "heldout"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    tok = chatml_tokenizer()
    return save_policy(build_tiny_model(len(tok), seed=0), tok, tmp_path_factory.mktemp("ckpt"))


def _q(p) -> str:
    return json.dumps(str(p))


def _cfg(tmp_path, splits, checkpoint, *sets):
    train, held = splits
    return load_rl_config(None, [f"runs_dir={_q(tmp_path / 'runs')}", "tasks.kind='single-turn'",
                                 f"tasks.path={_q(train)}", f"tasks.eval_path={_q(held)}",
                                 f"policy.init={_q(checkpoint)}", "tasks.max_tokens=12", *sets])


def test_envs_from_a_generated_set_use_the_template_and_the_suites_scorer(tmp_path, splits, checkpoint):
    env, held, _, tok, domain_ids = build_env(_cfg(tmp_path, splits, checkpoint), tmp_path, None)
    assert len(env.prompts) == 4 and len(held.prompts) == 4 and domain_ids == [env.task_ids]
    assert all(i.startswith("train-") for i in env.task_ids) and all(i.startswith("heldout-") for i in held.task_ids)
    task = suites.generate("instruct", tmp_path / "again", 4, seed=0, split="train")[0]
    p = env.prompts[0]
    assert p.text == tok.apply_chat_template([{"role": "user", "content": task.instruction.strip()}],
                                             tokenize=False, add_generation_prompt=True)
    assert env.stop_token_ids == [tok.eos_token_id] and env.temperature == 1.0
    assert held.temperature == 0.0 and held.group_size == 1        # greedy held-out evals
    reward = env.reward_fn(task.oracle_reply(), p)
    assert reward.value == 1.0 and reward.details["strict"] == 1.0
    assert env.reward_fn("", p).value < 1.0


def test_a_group_shares_one_prefill(tmp_path, splits, checkpoint):
    """The G samples of a prompt are submitted together: the engine prefills each prompt once."""
    env, _, model, tok, _ = build_env(_cfg(tmp_path, splits, checkpoint, "rollout.group_size=4"),
                                      tmp_path, None)
    engine = LocalEngine(model, tok)
    groups = env.run([GroupJob(i, i, env.task_ids[i], 7) for i in range(2)], engine)
    prompt_lens = [len(tok.encode(env.prompts[i].text, add_special_tokens=False)) for i in range(2)]
    assert [len(g) for g in groups] == [4, 4]
    assert engine.stats.prefill_tokens == sum(prompt_lens)
    assert all("strict" in e.reward_details for g in groups for e in g)


@pytest.mark.parametrize("sets, message", [
    (["tasks.path=''"], "needs tasks.path"),
    (["tasks.path='/no/such/dir'"], "is not a directory"),
    (["tasks.eval_path=''", "tasks.n_eval=4"], "too few to hold out"),
    (["policy.init='scratch'"], "HF model directory"),
    (["policy.hf_sft_steps=2"], "not single-turn tasks"),
    (["tasks.path=SANDBOX"], "one reply per task"),
])
def test_config_errors_are_one_line(tmp_path, splits, checkpoint, sets, message):
    sandbox = tmp_path / "sandbox"
    suites.generate("terminal-basics", sandbox, 2, seed=0)
    sets = [s.replace("SANDBOX", _q(sandbox)) for s in sets]
    with pytest.raises(ConfigError, match=message) as e:
        build_env(_cfg(tmp_path, splits, checkpoint, *sets), tmp_path, None)
    assert "\n" not in str(e.value)


def test_domains_are_refused_beside_single_turn_tasks(tmp_path, splits, checkpoint):
    with pytest.raises(ConfigError, match="single-turn prompts"):
        _cfg(tmp_path, splits, checkpoint, "domains=[{name='a', source='terminal-basics'}]")


def test_a_short_run_reports_paired_held_out_scores_and_writes_an_hf_policy(tmp_path, splits, checkpoint):
    from transformers import AutoModelForCausalLM

    cfg = _cfg(tmp_path, splits, checkpoint, "rollout.steps=2", "rollout.group_size=2",
               "rollout.groups_per_step=2", "rollout.max_staleness=0",
               # a random tiny model's replies often tie on every constraint: train on such groups too
               "rollout.filter_zero_variance=false")
    s = run_rl(cfg)
    for key in ("heldout_partial_before", "heldout_partial_after", "heldout_strict_before",
                "heldout_strict_after", "paired_diff", "paired_ci_low", "paired_ci_high", "paired_p",
                "paired_strict_diff", "wall_s", "cpu", "policy"):
        assert key in s, key
    assert s["kernel_plan"]["dtype"] == s["engine"]["dtype"] and s["kernel_plan"]["linear"]  # kernels/plan.py
    assert s["heldout_partial_before"] == s["eval_before"]["reward_mean"]
    assert s["paired_ci_low"] <= s["paired_diff"] <= s["paired_ci_high"] and s["paired_n_tasks"] == 4
    assert s["eval_before"]["temperature"] == 0.0 and s["eval_before"]["n_tasks"] == 4
    assert json.loads((cfg.run_dir / "summary.json").read_text())["paired_diff"] == s["paired_diff"]
    page = (cfg.run_dir / "report.html").read_text()
    assert "paired by task" in page and "data:image/png;base64," in page
    assert Path(s["policy"]).parent.name == "step-000002"       # the last step's weights
    policy = AutoModelForCausalLM.from_pretrained(s["policy"])
    start = AutoModelForCausalLM.from_pretrained(checkpoint)
    assert policy.state_dict().keys() == start.state_dict().keys()


def test_the_example_config_reads():
    cfg = load_rl_config(str(Path(__file__).parents[3] / "examples" / "smollm2_instruct.toml"))
    assert cfg.tasks.kind == "single-turn" and cfg.rollout.group_size == 8 and cfg.policy.init.endswith("smollm2-135m-instruct")
    assert cfg.engines.dtype == "auto"


def test_the_multi_turn_example_config_reads():
    cfg = load_rl_config(str(Path(__file__).parents[3] / "examples" / "smollm2_terminal.toml"))
    assert cfg.tasks.kind == "terminal-basics" and cfg.policy.hf_sft_steps > 0 and cfg.policy.sft_lr < 1e-3


def test_the_tool_use_example_config_reads():
    cfg = load_rl_config(str(Path(__file__).parents[3] / "examples" / "smollm2_tools.toml"))
    assert cfg.tasks.kind == "dir" and cfg.policy.hf_sft_steps > 0 and cfg.agent.harness == "auto"
    assert cfg.agent.max_reply_tokens >= 48          # a call with its JSON arguments fits
