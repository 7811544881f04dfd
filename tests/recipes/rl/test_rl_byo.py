"""`posttrain rl` on a user's own model and tasks: the checkpoint's chat template, Harbor tasks
without demonstrations, held-out splits, resume and failure rules, one clear line for each mistake."""

import json
import subprocess
import sys

import pytest

from posttrain.agent.framing import TemplateFramer
from posttrain.errors import ConfigError, PosttrainError
from posttrain.models.tiny import build_tiny_model, save_policy
from posttrain.recipes.rl.run import run_rl
from posttrain.recipes.rl.config import load_rl_config
from posttrain.recipes.rl.env import build_env

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "evals"))
from test_framing import chatml_tokenizer  # noqa: E402


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "posttrain.cli", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


@pytest.fixture(scope="module")
def harbor_tasks(tmp_path_factory):
    """Three ordinary Harbor tasks from `posttrain tasks new` (no solution/steps.json)."""
    root = tmp_path_factory.mktemp("byo") / "tasks"
    for name in ("hello-a", "hello-b", "hello-c"):
        r = _cli("tasks", "new", name, "--dir", str(root), cwd=root.parent)
        assert r.returncode == 0, r.stderr
    return root


@pytest.fixture(scope="module")
def chatml_checkpoint(tmp_path_factory):
    tok = chatml_tokenizer()
    return save_policy(build_tiny_model(len(tok), seed=0), tok, tmp_path_factory.mktemp("ckpt"))


def _cfg(tmp_path, *sets):
    return load_rl_config(None, [f"runs_dir={json.dumps(str(tmp_path / 'runs'))}", *sets])


def test_sandbox_tasks_are_framed_in_the_checkpoints_template(tmp_path, harbor_tasks, chatml_checkpoint):
    cfg = _cfg(tmp_path, "tasks.kind=dir", f"tasks.path={json.dumps(str(harbor_tasks))}",
               "tasks.n_eval=1", f"policy.init={json.dumps(str(chatml_checkpoint))}")
    env, held, _, tok, _ = build_env(cfg, tmp_path, None)
    assert isinstance(env.framer, TemplateFramer) and len(env.task_ids) == 2 and len(held.task_ids) == 1
    text = tok.decode(env.framer.prompt("Do X"))
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")


def test_copy_prompts_use_the_template_and_its_eos(tmp_path, chatml_checkpoint):
    cfg = _cfg(tmp_path, "tasks.kind=copy", f"policy.init={json.dumps(str(chatml_checkpoint))}")
    env, _, _, tok, _ = build_env(cfg, tmp_path, None)
    p = env.prompts[0]
    assert p.text == tok.apply_chat_template([{"role": "user", "content": f"copy: {p.target}"}],
                                             tokenize=False, add_generation_prompt=True)
    assert "<|bos|>" not in p.text and env.stop_token_ids == [tok.eos_token_id]


def test_a_tokenizer_without_a_template_is_refused_naming_what_is_missing(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel({"[UNK]": 0, "copy": 1, "</s>": 2}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]", eos_token="</s>",
                                  pad_token="[UNK]")
    bare = save_policy(build_tiny_model(len(tok), seed=0), tok, tmp_path / "bare")
    cfg = _cfg(tmp_path, "tasks.kind=copy", f"policy.init={json.dumps(str(bare))}")
    with pytest.raises(PosttrainError, match="no chat template"):
        build_env(cfg, tmp_path, None)


@pytest.mark.parametrize("sets, message", [
    (["tasks.kind=dir"], "needs tasks.path"),
    (["tasks.kind=dir", "tasks.path='/no/such/dir'"], "is not a directory"),
    (["tasks.kind=dir", "tasks.path=TASKS", "tasks.n_eval=3"], "too few to hold out"),
])
def test_bad_task_sources(tmp_path, harbor_tasks, sets, message):
    sets = [s.replace("TASKS", json.dumps(str(harbor_tasks))) for s in sets]
    with pytest.raises(ConfigError, match=message):
        build_env(_cfg(tmp_path, *sets), tmp_path, None)


def test_malformed_tasks_are_counted_and_the_first_reason_shown(tmp_path, harbor_tasks):
    import shutil

    root = shutil.copytree(harbor_tasks, tmp_path / "tasks")
    (root / "hello-b" / "task.toml").write_text('[verifier]\ntimeout_sec = "long"\n')
    warnings = []
    cfg = _cfg(tmp_path, "tasks.kind=dir", f"tasks.path={json.dumps(str(root))}", "tasks.n_eval=1",
               "policy.init='unused'")
    from posttrain.recipes.rl.domains import sandbox_tasks

    tasks = sandbox_tasks(cfg, tmp_path / "run", warnings.append)
    assert [t.id for t in tasks.train + tasks.held] == ["hello-a", "hello-c"] and len(tasks.held) == 1
    assert len(warnings) == 1 and "skipped 1 of 3" in warnings[0] and "timeout_sec" in warnings[0]


def test_scratch_without_demonstrations_is_one_line_and_leaves_no_run_dir(tmp_path, harbor_tasks):
    args = ["rl", "--set", "tasks.kind=dir", "--set", f"tasks.path={json.dumps(str(harbor_tasks))}",
            "--set", "tasks.n_eval=1"]
    for _ in range(2):      # the second run fails the same way, not with "already exists"
        r = _cli(*args, cwd=tmp_path)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "solution/steps.json" in r.stderr and "policy.init" in r.stderr
        assert r.stderr.strip().count("\n") == 0, r.stderr
        assert not (tmp_path / "runs" / "rl").exists()


def test_an_all_skipped_run_says_so_and_exits_non_zero(tmp_path, harbor_tasks, chatml_checkpoint):
    """A random model never solves hello-world: every group's rewards are 0, every step skipped."""
    r = _cli("rl", "--set", "tasks.kind=dir", "--set", f"tasks.path={json.dumps(str(harbor_tasks))}",
             "--set", "tasks.n_eval=0", "--set", f"policy.init={json.dumps(str(chatml_checkpoint))}",
             "--set", "rollout.steps=1", "--set", "rollout.group_size=2", "--set", "rollout.max_staleness=0",
             "--set", "rollout.max_refill_rounds=1", "--set", "agent.max_turns=1",
             "--set", "agent.max_reply_tokens=4", cwd=tmp_path)
    assert r.returncode == 2 and "all 1 steps were skipped" in r.stderr, r.stderr
    summary = json.loads((tmp_path / "runs" / "rl" / "summary.json").read_text())
    assert summary["steps_trained"] == 0 and summary["episode_statuses"]


def test_resume_refuses_a_changed_config_and_lists_the_differences(tmp_path):
    common = [f"runs_dir={json.dumps(str(tmp_path / 'runs'))}", "tasks.kind=copy", "tasks.n_train=4",
              "tasks.n_eval=0", "policy.sft_steps=2", "rollout.steps=1", "rollout.max_staleness=0"]
    run_rl(load_rl_config(None, common))
    same = load_rl_config(None, [common[0]], resume=True)       # the run's own config
    assert same.tasks.kind == "copy" and same.rollout.steps == 1
    with pytest.raises(ConfigError, match=r"rollout\.steps: 1 -> 3.*seed: 0 -> 5"):
        load_rl_config(None, common + ["rollout.steps=3", "seed=5"], resume=True)
    with pytest.raises(ConfigError, match=r"seed: 0 -> 5; drop the changes"):
        load_rl_config(None, common + ["seed=5"], resume=True)


def test_resume_cannot_extend_a_finished_run_and_says_so(tmp_path):
    common = [f"runs_dir={json.dumps(str(tmp_path / 'runs'))}", "tasks.kind=copy", "tasks.n_train=4",
              "tasks.n_eval=0", "policy.sft_steps=0", "rollout.steps=1", "rollout.max_staleness=0"]
    run_rl(load_rl_config(None, common))
    r = _cli("rl", "--resume", *sum((["--set", s] for s in common[:1] + ["rollout.steps=2"]), []),
             cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "--resume cannot extend a run" in r.stderr
    assert "checkpoints/step-000001/model" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_resume_with_overwrite_is_refused(tmp_path):
    r = _cli("rl", "--resume", "--overwrite", cwd=tmp_path)
    assert r.returncode == 2 and "--resume" in r.stderr and "Traceback" not in r.stderr


def test_an_hf_checkpoint_is_sft_warm_started_in_its_template_when_asked(tmp_path, harbor_tasks, chatml_checkpoint):
    import shutil

    from posttrain.models.tiny import load_policy

    root = shutil.copytree(harbor_tasks, tmp_path / "tasks")
    for d in root.iterdir():
        (d / "solution" / "steps.json").write_text('["printf \'Hello, world!\\\\n\' > /app/hello.txt"]\n')
    sets = ["tasks.kind=dir", f"tasks.path={json.dumps(str(root))}", "tasks.n_eval=1",
            f"policy.init={json.dumps(str(chatml_checkpoint))}", "policy.sft_batch=2"]
    before = load_policy(chatml_checkpoint)[0].state_dict()
    untouched = build_env(_cfg(tmp_path, *sets), tmp_path, None).model
    tuned = build_env(_cfg(tmp_path, *sets, "policy.hf_sft_steps=2"), tmp_path, None).model
    name = "model.embed_tokens.weight"
    assert untouched.state_dict()[name].equal(before[name])
    assert not tuned.state_dict()[name].equal(before[name])
    with pytest.raises(PosttrainError, match="hf_sft_steps"):
        build_env(_cfg(tmp_path, "tasks.kind=dir", f"tasks.path={json.dumps(str(harbor_tasks))}",
                       "tasks.n_eval=1", f"policy.init={json.dumps(str(chatml_checkpoint))}",
                       "policy.hf_sft_steps=2"), tmp_path, None)       # tasks without steps.json
