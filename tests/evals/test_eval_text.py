"""A local checkpoint through the embedded engine and the text protocol, via the CLI."""

import json

import pytest
from typer.testing import CliRunner

from posttrain.cli import _register_all, app
from posttrain.evals import taxonomy
from posttrain.evals.textrun import prompt_lengths
from posttrain.models.tiny import build_tiny_model, build_tokenizer, save_policy


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    corpus = ["<bash>cat /app/data.txt</bash>", "<submit/>", "echo hello > /app/answer.txt"] * 20
    tok = build_tokenizer(corpus, vocab_size=300)
    model = build_tiny_model(len(tok), seed=0)
    return save_policy(model, tok, tmp_path_factory.mktemp("ckpt"))


def test_prompt_lengths_are_run_starts():
    # prompt 3 tokens, reply 2, observation 2, reply 1
    assert prompt_lengths([0, 0, 0, 1, 1, 0, 0, 1]) == [3, 7]


def test_local_checkpoint_text_protocol_via_cli(tmp_path, task_dir, checkpoint):
    _register_all()
    args = ["eval", "--tasks", str(task_dir), "--model", str(checkpoint), "-k", "2", "--jobs", "4",
            "--job", "local", "--jobs-dir", str(tmp_path / "jobs"), "--max-turns", "2",
            "--max-reply-tokens", "8"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    path = tmp_path / "jobs" / "local"
    s = json.loads((path / "result.json").read_text())
    assert s["protocol"] == "text" and s["n_trials"] == 8 and s["complete"]
    assert sum(s["counts"].values()) == 8 and set(s["counts"]) == set(taxonomy.STATUSES)
    assert s["tokens"]["output"] > 0 and s["tokens"]["input"] > s["tokens"]["output"]
    rec = json.loads((path / "heldout-0000-find-word__1" / "result.json").read_text())
    assert rec["n_turns"] >= 1 and rec["timings"]["model_s"] > 0
    traj = json.loads((path / "heldout-0000-find-word__1" / "agent/trajectory.json").read_text())
    assert traj["agent"] == "posttrain-text" and traj["turns"]
    snaps = [c for c in traj["checkpoints"] if c["kind"] == "snapshot"]  # one per turn but the last
    assert len(snaps) >= rec["n_turns"] - 1 and all(c["ms"] > 0 for c in snaps)

    report = CliRunner().invoke(app, ["eval", "report", str(path)])
    assert report.exit_code == 0, report.output
    assert "data:image/png;base64," in (path / "report.html").read_text()


def test_context_policy_is_a_condition_and_the_report_shows_each_turn(tmp_path, task_dir, checkpoint):
    _register_all()
    args = ["eval", "--tasks", str(task_dir), "--model", str(checkpoint), "-k", "1", "--jobs", "4",
            "--job", "ctx", "--jobs-dir", str(tmp_path / "jobs"), "--max-turns", "3",
            "--max-reply-tokens", "8", "--context", "last_k:k=1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    path = tmp_path / "jobs" / "ctx"
    config = json.loads((path / "heldout-0000-find-word__0" / "config.json").read_text())
    assert config["conditions"]["context"] == [["*", "last_k:k=1"]]
    traj = json.loads((path / "heldout-0000-find-word__0" / "agent/trajectory.json").read_text())
    assert len(traj["earlier_segments"]) == len(traj["turns"]) - 2     # rewritten from the 3rd call
    assert all(t["model_s"] > 0 and t["at_s"] >= 0 for t in traj["turns"])
    again = CliRunner().invoke(app, args[:-1] + ["last_k:k=2"])
    assert again.exit_code != 0 and "context: [[" in str(again.exception)   # a job keeps its policy

    report = CliRunner().invoke(app, ["eval", "report", str(path)])
    assert report.exit_code == 0, report.output
    page = (path / "report.html").read_text()
    assert "<details id='heldout-0000-find-word__0'>" in page
    assert "href='heldout-0000-find-word__0/agent/trajectory.json'" in page and "model_s" in page


def test_engine_failure_is_an_infra_error_not_a_crash(tmp_path, task_dir):
    """A checkpoint whose model vocabulary is smaller than its tokenizer's: generate raises."""
    tok = build_tokenizer(["<bash>ls</bash>"] * 10, vocab_size=300)
    bad = save_policy(build_tiny_model(64, seed=0), tok, tmp_path / "bad")
    from posttrain.evals.launch import EvalRequest, evaluate

    req = EvalRequest(str(task_dir), str(bad), k=1, jobs=4, job="bad", jobs_dir=str(tmp_path / "jobs"),
                      settings={"max_infra_retries": 1})
    _, s = evaluate(req)
    assert s["counts"]["infra_error"] == 4 and s["infra_retries"] == 4
    rec = json.loads((tmp_path / "jobs/bad/heldout-0000-find-word__0/result.json").read_text())
    assert "outside [0, 64)" in rec["error"]


def test_new_weights_at_the_same_path_are_a_new_job(tmp_path, task_dir, checkpoint):
    """The job's conditions hold a digest of the checkpoint: retrained weights are never scored
    under the old model's finished trials."""
    import shutil

    from posttrain.errors import ConfigError
    from posttrain.evals.launch import EvalRequest, evaluate

    ckpt = shutil.copytree(checkpoint, tmp_path / "ckpt")
    settings = {"max_turns": 1, "max_reply_tokens": 4}
    req = dict(tasks_dir=str(task_dir), model=str(ckpt), k=1, jobs=4, jobs_dir=str(tmp_path / "jobs"),
               settings=settings)
    first, _ = evaluate(EvalRequest(**req))
    named, _ = evaluate(EvalRequest(**req, job="named"))
    tok = build_tokenizer(["<bash>ls</bash>"] * 10, vocab_size=300)
    save_policy(build_tiny_model(len(tok), seed=1), tok, ckpt)       # retrained in place
    second, _ = evaluate(EvalRequest(**req))
    assert second != first                                           # a new job, not a resume
    with pytest.raises(ConfigError, match="model_digest"):
        evaluate(EvalRequest(**req, job="named"))
