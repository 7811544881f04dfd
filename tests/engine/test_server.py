"""The OpenAI-compatible server on loopback, and RemoteEngine against it."""

import json
import threading
import time

import httpx
import pytest
import uvicorn

from posttrain.engine.base import SamplingParams
from posttrain.engine.clients.openai import RemoteEngine
from posttrain.engine.paged.local import LocalEngine
from posttrain.errors import PosttrainError
from posttrain.serve.app import create_app

PROMPT = [1, 3, 40, 41, 42, 43]


@pytest.fixture(scope="module")
def server(model, tokenizer):
    app = create_app(LocalEngine(model, tokenizer), "tiny")
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.02)
    port = srv.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


def test_health_models_metrics(server):
    assert httpx.get(f"{server}/health").json()["status"] == "ok"
    assert httpx.get(f"{server}/v1/models").json()["data"][0]["id"] == "tiny"
    text = httpx.get(f"{server}/metrics").text
    assert "# TYPE posttrain_generation_tokens_total counter" in text
    assert 'posttrain_engine_info{dtype="float32",reason="asked",packed="1",weights="compute"} 1' in text


def _sequences(server) -> int:
    line, = [x for x in httpx.get(f"{server}/metrics").text.splitlines() if x.startswith("posttrain_sequences_total ")]
    return int(line.split()[1])


def test_sequences_total_counts_each_prompt_times_n(server):
    before = _sequences(server)
    httpx.post(f"{server}/v1/completions", json={"prompt": [PROMPT, PROMPT[:3]], "max_tokens": 1, "n": 2})
    assert _sequences(server) - before == 4


def test_completions_with_token_ids_and_logprobs(server):
    body = {"prompt": PROMPT, "max_tokens": 5, "temperature": 0, "logprobs": 0, "ignore_eos": True}
    r = httpx.post(f"{server}/v1/completions", json=body).json()
    choice = r["choices"][0]
    assert len(choice["token_ids"]) == 5 and len(choice["logprobs"]["token_logprobs"]) == 5
    assert choice["finish_reason"] == "length" and r["usage"]["prompt_tokens"] == len(PROMPT)


def test_chat_completion_and_text_prompt(server):
    body = {"messages": [{"role": "user", "content": "ls"}], "max_tokens": 4, "seed": 1, "logprobs": True}
    r = httpx.post(f"{server}/v1/chat/completions", json=body).json()
    assert r["object"] == "chat.completion" and r["choices"][0]["message"]["role"] == "assistant"
    assert len(r["choices"][0]["logprobs"]["content"]) == len(r["choices"][0]["token_ids"])
    r = httpx.post(f"{server}/v1/completions", json={"prompt": "echo hi", "max_tokens": 3, "n": 3}).json()
    assert len(r["choices"]) == 3


def test_streaming_sends_chunks_then_done(server):
    body = {"prompt": PROMPT, "max_tokens": 6, "stream": True, "temperature": 0, "ignore_eos": True}
    with httpx.stream("POST", f"{server}/v1/completions", json=body) as r:
        events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    ids = [t for e in events[:-1] for t in json.loads(e)["choices"][0]["token_ids"]]
    full = httpx.post(f"{server}/v1/completions", json={**body, "stream": False}).json()
    assert ids == full["choices"][0]["token_ids"]


@pytest.mark.parametrize(
    "body, match",
    [
        ({"prompt": [], "max_tokens": 3}, "empty"),
        ({"prompt": PROMPT, "max_tokens": 0}, "max_tokens"),
        ({"prompt": list(range(1, 300)) * 8}, "context"),
        ({"prompt": PROMPT, "temperature": -1}, "temperature"),
        ({"max_tokens": 3}, "prompt"),
    ],
)
def test_bad_requests_get_400_with_message(server, body, match):
    r = httpx.post(f"{server}/v1/completions", json=body)
    assert r.status_code == 400 and match in r.json()["error"]["message"]


def test_malformed_json_is_400_and_server_keeps_serving(server):
    r = httpx.post(f"{server}/v1/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert httpx.post(f"{server}/v1/completions", json={"prompt": PROMPT, "max_tokens": 2}).status_code == 200


def test_client_disconnect_mid_stream_frees_sequences(server):
    body = {"prompt": PROMPT, "max_tokens": 1500, "stream": True, "ignore_eos": True}
    with httpx.stream("POST", f"{server}/v1/completions", json=body) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                break  # leave after the first chunk
    deadline = time.time() + 10
    while time.time() < deadline:
        metrics = httpx.get(f"{server}/metrics").text
        if "posttrain_running_sequences 0" in metrics:
            break
        time.sleep(0.05)
    assert "posttrain_running_sequences 0" in metrics
    assert "posttrain_client_disconnects_total 1" in metrics
    assert httpx.post(f"{server}/v1/completions", json={"prompt": PROMPT, "max_tokens": 2}).status_code == 200


def test_remote_engine_matches_local_engine(server, model, tokenizer):
    remote = RemoteEngine(server)
    params = SamplingParams(temperature=0.8, max_tokens=8, seed=4)
    prompts = [PROMPT, PROMPT, [1, 3, 60, 61]]
    got = remote.generate(prompts, params)
    want = LocalEngine(model, tokenizer).generate(prompts, params)
    assert [c.token_ids for c in got] == [c.token_ids for c in want]
    for g, w in zip(got, want):
        assert max(abs(a - b) for a, b in zip(g.logprobs, w.logprobs)) <= 1e-5
    with pytest.raises(PosttrainError, match="400"):
        remote.generate([[]], params)
    remote.close()


def test_remote_engine_unreachable_is_clear():
    with pytest.raises(PosttrainError, match="cannot reach"):
        RemoteEngine("http://127.0.0.1:9", timeout=2)


def test_tool_calls_are_parsed_from_tool_call_blocks():
    from posttrain.serve.tool_calls import parse_tool_calls

    text = 'Let me look.\n<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls"}}\n</tool_call>'
    content, calls = parse_tool_calls(text)
    assert content == "Let me look."
    assert calls[0]["function"] == {"name": "bash", "arguments": '{"cmd": "ls"}'}
    assert parse_tool_calls("<tool_call>{oops}</tool_call>") == ("<tool_call>{oops}</tool_call>", [])
    listed = '<tool_call>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}]</tool_call>'
    content, calls = parse_tool_calls(listed)       # SmolLM2's list form
    assert content == "" and [c["function"]["name"] for c in calls] == ["a", "b"]


def test_chat_accepts_tools(server):
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    body = {"messages": [{"role": "user", "content": "ls"}], "max_tokens": 3, "tools": tools}
    r = httpx.post(f"{server}/v1/chat/completions", json=body)
    assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls")
