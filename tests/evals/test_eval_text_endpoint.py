"""The text protocol over HTTP: a posttrain-trained model behind `posttrain serve`'s app on
loopback, evaluated through --base-url with the same text protocol `rl` trains it in.

The tiny Llama is fine-tuned here, in seconds, to solve one make-dir task (make_dir_model.py).
Through the tool-calling protocol such a model can only score model_error; through the text
protocol it passes, exactly as it does locally.
"""

import json

import pytest
from make_dir_model import make_dir_checkpoint
from scripted_server import serve_app

from posttrain.engine.paged.local import LocalEngine
from posttrain.evals.launch import EvalRequest, evaluate
from posttrain.serve.app import create_app


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return make_dir_checkpoint(tmp_path_factory.mktemp("text_endpoint"))


def test_text_protocol_through_an_endpoint_scores_like_local(tmp_path, trained):
    task_dir, ckpt, model, tok = trained
    settings = {"temperature": 0.0, "max_reply_tokens": 64, "agent_timeout_s": 600.0}
    with serve_app(create_app(LocalEngine(model, tok), "model")) as url:  # as `posttrain serve --model CKPT`
        req = EvalRequest(str(task_dir), str(ckpt), k=2, jobs=2, base_url=url, job="served",
                          jobs_dir=str(tmp_path / "jobs"), settings=settings)
        path, served = evaluate(req)
    assert served["protocol"] == "text" and served["counts"]["model_error"] == 0
    assert served["counts"]["passed"] == 2 and served["mean_reward"] == 1.0, served["counts"]
    traj = json.loads(next(path.glob("*__0/agent/trajectory.json")).read_text())
    assert traj["agent"] == "posttrain-text" and [t["kind"] for t in traj["turns"]] == ["bash", "submit"]
    conditions = json.loads((path / "config.json").read_text())["conditions"]
    assert conditions["base_url"] == url and conditions["model_digest"]
    _, local = evaluate(EvalRequest(str(task_dir), str(ckpt.parent), k=2, jobs=2, job="local",  # a step dir
                                    jobs_dir=str(tmp_path / "jobs"), settings=settings))
    assert local["per_task"] == served["per_task"]


def test_endpoint_that_does_not_serve_the_checkpoint_is_one_clear_error(tmp_path, trained):
    from posttrain.errors import PosttrainError

    task_dir, ckpt, model, tok = trained
    with serve_app(create_app(LocalEngine(model, tok), "other-name")) as url:
        req = EvalRequest(str(task_dir), str(ckpt), k=1, base_url=url, jobs_dir=str(tmp_path / "jobs"))
        with pytest.raises(PosttrainError, match="does not serve 'model'.*--served-model"):
            evaluate(req)
    assert not (tmp_path / "jobs").exists() or not any((tmp_path / "jobs").iterdir())
