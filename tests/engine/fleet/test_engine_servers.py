"""Engine-server clients without vLLM: transport and server errors over real loopback HTTP,
prefix-affine routing, and the conformance gate over the embedded engine."""

import copy
import http.server
import json
import threading

import pytest
import torch

from posttrain.engine.clients.http_json import JSONClient
from posttrain.engine.clients.vllm import VLLMEngine
from posttrain.engine.clients.weight_files import staged_weights, unique_tensors
from posttrain.engine.fleet.config import EnginesConfig
from posttrain.engine.fleet.routing import AffinityRouter
from posttrain.engine.paged.local import LocalEngine
from posttrain.errors import EngineError, PosttrainError
from posttrain.rollout.conformance import GatedEngine


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers from the server's `script`: path -> (status, body bytes) or "drop" (close
    the connection without answering, once per entry in `drops`)."""

    def log_message(self, *args):
        pass

    def _answer(self):
        srv = self.server
        srv.hits.append(self.path)
        if srv.drops.get(self.path, 0) > 0:
            srv.drops[self.path] -= 1
            self.close_connection = True
            return
        status, body = srv.script.get(self.path.split("?")[0], (404, b'{"detail": "Not Found"}'))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer


@pytest.fixture
def scripted():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    srv.script, srv.drops, srv.hits = {}, {}, []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _url(srv):
    return f"http://127.0.0.1:{srv.server_address[1]}"


def test_url_that_does_not_answer_is_an_engine_error():
    with pytest.raises(EngineError, match="cannot reach http://127.0.0.1:9/v1/models"):
        VLLMEngine("http://127.0.0.1:9", timeout=2.0)


def test_malformed_json_is_an_engine_error(scripted):
    scripted.script["/v1/models"] = (200, b'{"data": [{"id": "policy"')
    with pytest.raises(EngineError, match="malformed JSON"):
        VLLMEngine(_url(scripted))


def test_server_error_carries_the_servers_message(scripted):
    scripted.script["/v1/models"] = (200, b'{"data": [{"id": "policy"}]}')
    scripted.script["/v1/completions"] = (400, json.dumps(
        {"error": {"message": "prompt is longer than the context (4097 > 4096)"}}).encode())
    from posttrain.engine.base import SamplingParams

    engine = VLLMEngine(_url(scripted))
    with pytest.raises(EngineError, match=r"answered 400: prompt is longer than the context"):
        engine.generate([[1, 2, 3]], SamplingParams(max_tokens=4))


def test_an_answer_without_token_ids_is_refused(scripted):
    scripted.script["/v1/models"] = (200, b'{"data": [{"id": "policy"}]}')
    scripted.script["/v1/completions"] = (200, b'{"choices": [{"text": "hi"}]}')
    from posttrain.engine.base import SamplingParams

    with pytest.raises(EngineError, match="no token ids and logprobs"):
        VLLMEngine(_url(scripted)).generate([[1, 2]], SamplingParams(max_tokens=2))


def test_a_transport_fault_is_retried_once_and_only_once(scripted):
    scripted.script["/health"] = (200, b"{}")
    scripted.drops["/health"] = 1
    assert JSONClient(_url(scripted)).call("GET", "/health") == {}
    assert scripted.hits.count("/health") == 2
    scripted.drops["/health"] = 2
    with pytest.raises(EngineError, match="cannot reach"):
        JSONClient(_url(scripted)).call("GET", "/health")
    assert scripted.hits.count("/health") == 4


def test_router_keeps_an_episode_on_its_replica_and_spreads_new_ones():
    r = AffinityRouter(slack_tokens=1000)
    load = {0: 0, 1: 0}
    a, b = [5] * 40, [6] * 40
    ra, rb = r.choose(a, load), r.choose(b, load)
    assert ra != rb  # new episodes spread over equally loaded replicas
    load = {0: 300, 1: 0} if ra == 0 else {0: 0, 1: 300}
    assert r.choose(a + [7, 8, 9] + [1] * 20, load) == ra  # next turn: same replica, despite load
    assert r.choose(a, load) == ra  # the rest of the group


def test_router_load_guard_overrides_affinity_and_forgets_dead_replicas():
    r = AffinityRouter(slack_tokens=100)
    a = [3] * 30
    first = r.choose(a, {0: 0, 1: 0})
    other = 1 - first
    assert r.choose(a + [4], {first: 500, other: 0}) == other  # overloaded: least outstanding wins
    r.forget(other)
    assert r.choose(a + [4, 4], {first: 0}) == first


def test_staged_weights_drop_tied_copies_and_vanish(model):
    sd = model.state_dict()
    with staged_weights(sd) as (d, nbytes):
        assert (d / "model.safetensors").is_file()
        assert nbytes == sum(t.numel() * t.element_size() for t in unique_tensors(sd).values())
    assert not d.exists()


def test_gate_passes_an_agreeing_engine_and_refuses_other_weights(tmp_path, model, tokenizer):
    cfg = EnginesConfig(probes=2, probe_tokens=6)
    gated = GatedEngine(LocalEngine(copy.deepcopy(model), tokenizer), tokenizer, tmp_path, cfg, 1.0)
    report = gated.start(model)
    assert report.max_abs < 1e-4 and report.tokens == 12
    other = copy.deepcopy(model)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    bad = GatedEngine(LocalEngine(other, tokenizer), tokenizer, tmp_path, cfg, 1.0)
    with pytest.raises(PosttrainError, match="mismatch at start.*likely cause: weights"):
        bad.check(model, 0, at_start=True)
    rows = [json.loads(x) for x in (tmp_path / "conformance.jsonl").open()]
    assert [r["over"] for r in rows] == [False, True]


def test_gate_names_stale_weights(tmp_path, model, tokenizer):
    cfg = EnginesConfig(probes=2, probe_tokens=4)
    gated = GatedEngine(LocalEngine(copy.deepcopy(model), tokenizer), tokenizer, tmp_path, cfg, 1.0)
    # same weights, but the engine holds version 0 while the trainer is at 3
    with pytest.raises(PosttrainError, match="stale weights"):
        gated.check(model, 3, at_start=True)
