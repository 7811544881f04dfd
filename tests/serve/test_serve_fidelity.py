"""The server behaves as OpenAI's API does where the two used to differ (issue 14, item 6)."""

import json
import time

import httpx
import pytest
import torch
from serve_helpers import Served, chat_text

from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.local import LocalEngine
from posttrain.serve.app import create_app

LIST = [{"role": "user", "content": "list files"}]


def _chat(served, **body):
    return httpx.post(f"{served.url}/chat/completions", json={"messages": LIST, "temperature": 0, **body}, timeout=60)


def _complete(served, **body):
    return httpx.post(f"{served.url}/completions", json={"temperature": 0, **body}, timeout=60)


def _metric(served, name: str) -> int:
    for line in httpx.get(f"{served.base}/metrics").text.splitlines():
        if line.startswith(f"posttrain_{name} "):
            return int(float(line.split()[1]))
    raise KeyError(name)


def test_action_tokens_show_by_default_and_skip_special_tokens_chooses(served):
    assert _chat(served).json()["choices"][0]["message"]["content"] == "<bash>ls -la</bash>"
    assert _chat(served, skip_special_tokens=True).json()["choices"][0]["message"]["content"] == "ls -la"
    shown = _chat(served, skip_special_tokens=False).json()["choices"][0]["message"]["content"]
    assert shown == "<bash>ls -la</bash><|end|>"


def test_stop_strings_are_excluded_from_text_and_stream(served):
    r = _complete(served, prompt=chat_text("list files"), max_tokens=20, stop=["-la"]).json()["choices"][0]
    assert r["text"] == "<bash>ls " and r["finish_reason"] == "stop"
    body = {"prompt": chat_text("list files"), "max_tokens": 20, "stop": "-la", "stream": True, "temperature": 0}
    with httpx.stream("POST", f"{served.url}/completions", json=body) as s:
        chunks = [json.loads(x[6:]) for x in s.iter_lines() if x.startswith("data: {")]
    assert "".join(c["choices"][0]["text"] for c in chunks) == "<bash>ls "


def test_unknown_model_is_404_in_openai_shape(served):
    r = _chat(served, model="gpt-4o")
    assert r.status_code == 404
    err = r.json()["error"]
    assert err["code"] == "model_not_found" and err["param"] == "model" and "gpt-4o" in err["message"]
    assert _chat(served, model="tiny-agent", max_tokens=2).status_code == 200


@pytest.mark.parametrize("field", [{"presence_penalty": 0.5}, {"frequency_penalty": 0.5}, {"logit_bias": {"5": 1}},
                                   {"no_such_field": 1},
                                   {"tool_choice": "required"}, {"stream_options": {"include_usage": True}},
                                   {"top_logprobs": 2}, {"response_format": {"type": "json_object"}}])
def test_fields_that_cannot_be_honoured_are_400(served, field):
    r = _chat(served, max_tokens=2, **field)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["param"] == next(iter(field)) and err["code"] is None


def test_malformed_json_has_no_param_and_nulls_take_defaults(served):
    r = httpx.post(f"{served.url}/chat/completions", content=b'{"messages": [', timeout=60,
                   headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["param"] is None and r.json()["error"]["code"] is None, r.text
    nulls = {"temperature": None, "top_p": None, "n": None, "stream": None, "logprobs": None, "seed": None}
    assert _chat(served, max_tokens=2, **nulls).status_code == 200


def test_echo_returns_the_prompt_with_its_logprobs(served, agent_model, tok):
    prompt = tok.encode(chat_text("list files"), add_special_tokens=False)
    c = _complete(served, prompt=prompt, max_tokens=1, echo=True, logprobs=2).json()["choices"][0]
    lp = c["logprobs"]
    assert c["text"].startswith("<|bos|><|user|>list files") and c["prompt_token_ids"] == prompt
    assert len(lp["token_logprobs"]) == len(prompt) + 1 and lp["token_logprobs"][0] is None
    with torch.no_grad():
        want = torch.log_softmax(agent_model(input_ids=torch.tensor([prompt])).logits[0, :-1], -1)
    want = want.gather(-1, torch.tensor(prompt[1:]).unsqueeze(-1)).squeeze(-1).tolist()
    assert max(abs(a - b) for a, b in zip(lp["token_logprobs"][1 : len(prompt)], want)) < 1e-4
    assert lp["top_logprobs"][0] is None and all(2 <= len(t) <= 3 for t in lp["top_logprobs"][1:])
    only = _complete(served, prompt=prompt, max_tokens=0, echo=True, logprobs=0).json()["choices"][0]
    assert only["logprobs"]["token_logprobs"][1:] == pytest.approx(lp["token_logprobs"][1 : len(prompt)], abs=1e-6)


def test_top_logprobs_are_the_most_likely_tokens(served):
    content = _chat(served, logprobs=True, top_logprobs=3).json()["choices"][0]["logprobs"]["content"]
    for entry in content:  # greedy: the chosen token is the most likely one
        tops = entry["top_logprobs"]
        assert len(tops) == 3 and tops[0]["token"] == entry["token"]
        assert tops[0]["logprob"] == pytest.approx(entry["logprob"]) and tops[0]["logprob"] >= tops[1]["logprob"]


def test_max_completion_tokens_is_the_newer_max_tokens(served):
    r = _chat(served, max_completion_tokens=2, ignore_eos=True).json()
    assert r["usage"]["completion_tokens"] == 2 and r["choices"][0]["finish_reason"] == "length"


def test_stream_options_include_usage(served):
    body = {"messages": LIST, "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", f"{served.url}/chat/completions", json=body) as s:
        chunks = [json.loads(x[6:]) for x in s.iter_lines() if x.startswith("data: {")]
    assert all(c["usage"] is None for c in chunks[:-1]) and chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == sum(len(c["choices"][0]["token_ids"]) for c in chunks[:-1])


def test_only_a_choices_first_stream_delta_has_the_role(served):
    body = {"messages": LIST, "temperature": 0, "stream": True, "max_tokens": 6, "ignore_eos": True}
    with httpx.stream("POST", f"{served.url}/chat/completions", json=body, timeout=60) as s:
        chunks = [json.loads(x[6:]) for x in s.iter_lines() if x.startswith("data: {")]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert len(deltas) > 1 and deltas[0]["role"] == "assistant"
    assert not any("role" in d for d in deltas[1:]), deltas


def test_chat_replies_default_to_the_rest_of_the_context(agent_model, tok):
    served = Served(create_app(LocalEngine(agent_model, tok, config=EngineConfig(max_model_len=40)), "tiny-agent"))
    try:
        r = _chat(served, ignore_eos=True).json()
    finally:
        served.close()
    assert r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"] == 40
    assert r["choices"][0]["finish_reason"] == "length"


def test_non_streaming_client_that_leaves_is_aborted(served):
    before = _metric(served, "client_disconnects_total")
    body = {"prompt": chat_text("list files"), "max_tokens": 2000, "ignore_eos": True}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{served.url}/completions", json=body, timeout=0.5)
    deadline = time.time() + 5
    while time.time() < deadline and _metric(served, "running_sequences"):
        time.sleep(0.05)
    assert _metric(served, "running_sequences") == 0
    assert _metric(served, "client_disconnects_total") == before + 1
    assert _complete(served, prompt=chat_text("list files"), max_tokens=2).status_code == 200


def test_engine_failure_is_500_and_the_server_recovers(agent_model, tok):
    engine = LocalEngine(agent_model, tok)
    served = Served(create_app(engine, "tiny-agent"))
    forward = engine.runner.forward

    def broken(*args):
        raise RuntimeError("simulated device fault")

    try:
        engine.runner.forward = broken  # fault injection: the next engine step raises
        r = _chat(served, max_tokens=3)
        assert r.status_code == 500 and r.json()["error"]["type"] == "server_error"
        assert "simulated device fault" in r.json()["error"]["message"]
        engine.runner.forward = forward
        assert _chat(served, max_tokens=3).status_code == 200
        assert _chat(served, max_tokens=0).status_code == 400  # a client mistake stays 4xx
    finally:
        served.close()


def test_api_key_is_checked_when_set(agent_model, tok):
    served = Served(create_app(LocalEngine(agent_model, tok), "tiny-agent", api_key="sekrit"))
    try:
        refused = httpx.get(f"{served.url}/models")
        assert refused.status_code == 401
        assert refused.json()["error"] == {"message": refused.json()["error"]["message"], "param": None,
                                           "type": "authentication_error", "code": "invalid_api_key"}
        ok = httpx.get(f"{served.url}/models", headers={"Authorization": "Bearer sekrit"})
        assert ok.status_code == 200 and ok.json()["data"][0]["id"] == "tiny-agent"
    finally:
        served.close()


def test_serve_off_loopback_needs_an_api_key():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "posttrain.cli", "serve", "--model", "m", "--host", "0.0.0.0"],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 2 and "--api-key" in r.stderr and "Traceback" not in r.stderr, r.stderr
