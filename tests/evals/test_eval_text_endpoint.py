"""The text protocol over HTTP: a posttrain-trained model behind `posttrain serve`'s app on
loopback, evaluated through --base-url with the same text protocol `rl` trains it in.

The tiny Llama is fine-tuned here, in seconds, on the embedded chat layout to solve one make-dir
task: `<bash>STEP</bash>`, then `<submit/>`. Through the tool-calling protocol such a model can
only score model_error; through the text protocol it passes, exactly as it does locally.
"""

import json

import pytest
import torch
from scripted_server import serve_app

from posttrain.agent.chat import SYSTEM_PROMPT, ChatFramer
from posttrain.engine.paged.local import LocalEngine
from posttrain.evals.launch import EvalRequest, evaluate
from posttrain.models.tiny import build_tiny_model, build_tokenizer, save_policy
from posttrain.serve.app import create_app
from posttrain.tasks import load_tasks
from posttrain.tasks.suites import terminal_basics


def _sequences(framer, task):
    """(context, reply) token ids for both turns of the oracle in the text protocol."""
    (step,) = task.oracle_steps()
    prompt, first = framer.prompt(task.instruction), framer.reply(f"<bash>{step}</bash>")
    after = prompt + first + framer.observation("(no output)")
    return [(prompt, first), (after, framer.reply("<submit/>"))]


def _fine_tune(model, seqs, steps=200):
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is faster, and much faster on a busy box
    try:
        for _ in range(steps):
            loss = sum(torch.nn.functional.cross_entropy(
                model(input_ids=torch.tensor([p + r])).logits[0, len(p) - 1:-1], torch.tensor(r)) for p, r in seqs)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if loss.item() < 0.02:  # greedy decoding reproduces both replies well before this
                break
    finally:
        torch.set_num_threads(threads)
    return model.eval()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tmp_path_factory.mktemp("text_endpoint")
    terminal_basics.generate(d / "tasks", 1, seed=3, split="heldout", families=["make-dir"])
    task = load_tasks(d / "tasks")[0]
    (step,) = task.oracle_steps()
    tok = build_tokenizer([SYSTEM_PROMPT, task.instruction, f"<bash>{step}</bash>", "<submit/>"] * 5, vocab_size=400)
    torch.manual_seed(0)
    model = _fine_tune(build_tiny_model(len(tok), seed=0), _sequences(ChatFramer(tok), task))
    return d / "tasks", save_policy(model, tok, d / "run" / "step-1" / "model"), model, tok


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
