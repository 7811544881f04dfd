"""End to end through `posttrain serve`: a real model behind the real OpenAI-compatible server
on loopback, evaluated on a task through tool calls.

The model writes Hermes/Qwen-style `<tool_call>` blocks; the server parses them into OpenAI
`tool_calls`, and its chat template renders them back the same way on the next request (as
Qwen's template does), so the model sees exactly the tokens it produced. The model is a tiny
Llama fine-tuned here, in seconds, to solve one make-dir task: one `bash` call, then `submit`.
"""

import json

import pytest
import torch
from scripted_server import serve_app

from posttrain.engine.paged.local import LocalEngine
from posttrain.evals.launch import EvalRequest, evaluate
from posttrain.agent.harness.toolagent import SYSTEM_PROMPT
from posttrain.models.tiny import build_tiny_model, build_tokenizer
from posttrain.serve.app import create_app
from posttrain.tasks import load_tasks
from posttrain.tasks.suites import terminal_basics

# The embedded chat layout plus Hermes-style rendering of an assistant's structured tool calls.
TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}"
    "{% for c in message.get('tool_calls') or [] %}<tool_call>{\"name\": \""
    "{{ c['function']['name'] }}\", \"arguments\": {{ c['function']['arguments'] }}}</tool_call>"
    "{% endfor %}<|end|>{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _call(name, arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def _turns(task):
    """(messages so far, the reply to learn) for each turn of the oracle as tool calls."""
    (step,) = task.oracle_steps()
    msgs = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.instruction}]
    structured = {"id": "call_0", "type": "function",
                  "function": {"name": "bash", "arguments": json.dumps({"command": step})}}
    after = msgs + [{"role": "assistant", "content": "", "tool_calls": [structured]},
                    {"role": "tool", "tool_call_id": "call_0", "content": "(no output)"}]
    return [(msgs, _call("bash", {"command": step})), (after, _call("submit", {}))]


def _fine_tune(model, tok, turns, steps=200):
    seqs = []
    for msgs, reply in turns:
        prompt = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        p_ids = tok.encode(prompt, add_special_tokens=False)
        r_ids = tok.encode(reply + "<|end|>", add_special_tokens=False)
        seqs.append((p_ids, r_ids))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is faster, and much faster on a busy box
    try:
        _steps(model, opt, seqs, steps)
    finally:
        torch.set_num_threads(threads)
    return model.eval()


def _steps(model, opt, seqs, steps):
    for _ in range(steps):
        loss = 0.0
        for p_ids, r_ids in seqs:
            ids = torch.tensor([p_ids + r_ids])
            logits = model(input_ids=ids).logits[0, len(p_ids) - 1:-1]
            loss = loss + torch.nn.functional.cross_entropy(logits, torch.tensor(r_ids))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if loss.item() < 0.02:  # greedy decoding reproduces both replies well before this
            break


@pytest.fixture(scope="module")
def make_dir_task(tmp_path_factory):
    d = tmp_path_factory.mktemp("serve_tasks")
    terminal_basics.generate(d, 1, seed=3, split="heldout", families=["make-dir"])
    return d, load_tasks(d)[0]


def test_eval_of_a_model_behind_posttrain_serve(tmp_path, make_dir_task):
    task_dir, task = make_dir_task
    turns = _turns(task)
    tok = build_tokenizer([SYSTEM_PROMPT, task.instruction] + [r for _, r in turns] * 5, vocab_size=400)
    tok.chat_template = TEMPLATE
    torch.manual_seed(0)
    model = _fine_tune(build_tiny_model(len(tok), seed=0), tok, turns)
    app = create_app(LocalEngine(model, tok), "tiny-tools")
    with serve_app(app) as url:
        req = EvalRequest(str(task_dir), "tiny-tools", k=2, jobs=2, base_url=url, job="served",
                          jobs_dir=str(tmp_path / "jobs"), settings={"temperature": 0.0, "agent_timeout_s": 600.0})
        path, s = evaluate(req)
    assert s["counts"]["passed"] == 2, s["counts"]
    assert s["mean_reward"] == 1.0 and s["pass_at_k"]["2"] == 1.0
    rec = json.loads((path / f"{task.id}__0" / "result.json").read_text())
    assert rec["n_turns"] == 2 and rec["n_input_tokens"] > 0 and rec["n_output_tokens"] > 0
    traj = json.loads((path / f"{task.id}__0" / "agent/trajectory.json").read_text())
    call = traj["messages"][2]["tool_calls"][0]["function"]  # parsed by the server
    assert traj["submitted"] and call["name"] == "bash" and "mkdir" in call["arguments"]
