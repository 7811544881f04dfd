"""Helpers for the server tests: the tiny agent model's replies, its training, and a real
uvicorn server on a free loopback port.

The model learns, after the embedded chat framing, to answer "list files" with the agent's
action `<bash>ls -la</bash>`, "are you done" with `<submit/>`, and "weather in Paris" with a
Hermes-style tool call, so tests can check exactly what text and tool calls come back.
"""

import json
import socket
import threading
import time

import pytest
import torch
import uvicorn


WEATHER_CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
REPLIES = {
    "list files": "<bash>ls -la</bash>",
    "are you done": "<submit/>",
    "weather in Paris": WEATHER_CALL,
}


def chat_text(user: str) -> str:
    """The embedded template's rendering of one user turn, ready for the reply."""
    return f"<|bos|><|user|>{user}<|end|><|assistant|>"


def corpus() -> list[str]:
    texts = [chat_text(u) + r + "<|end|>" for u, r in REPLIES.items()] * 20
    return texts + [f"echo step {i}: cat file_{i}.txt | grep héllo" for i in range(50)]


def train(model, tok, steps: int = 300):
    seqs = []
    for user, reply in REPLIES.items():
        p = tok.encode(chat_text(user), add_special_tokens=False)
        r = tok.encode(reply + "<|end|>", add_special_tokens=False)
        seqs.append((torch.tensor([p + r]), len(p), torch.tensor(r)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is faster, much faster on a busy box
    try:
        _steps(model, opt, seqs, steps)
    finally:
        torch.set_num_threads(threads)
    return model.eval()


def _steps(model, opt, seqs, steps):
    for _ in range(steps):
        loss = 0.0
        for ids, n_prompt, target in seqs:
            logits = model(input_ids=ids).logits[0, n_prompt - 1 : -1]
            loss = loss + torch.nn.functional.cross_entropy(logits, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if loss.item() < 0.05:  # greedy decoding reproduces every reply well before this
            break


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """A running uvicorn server on loopback; `url` ends in /v1."""

    def __init__(self, app):
        self.app = app
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.time() + 10
        while not self.server.started:
            assert time.time() < deadline, "the server did not start"
            time.sleep(0.02)
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = self.base + "/v1"

    @property
    def server_state(self):
        return self.app.state.server

    def close(self):
        self.server.should_exit = True
        self.thread.join(timeout=10)


def tool_spec() -> list[dict]:
    params = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    return [{"type": "function", "function": {"name": "get_weather", "parameters": params}}]


def parse_args(call) -> dict:
    return json.loads(call["function"]["arguments"] if isinstance(call, dict) else call.function.arguments)


def need(module: str):
    """Import a test-extra client; skip without it on a developer machine (a failure in CI:
    tests/ci_skips.py)."""
    return pytest.importorskip(module, reason=f"{module} is a test extra: pip install -c constraints.txt -e '.[test]'")
