"""Greedy repeatability through the real server: the same temperature-0 request twice, the second
one served from the prefix cache. fp32 must repeat; bf16 is only recorded (docs/gateway.md)."""

import httpx
import pytest
from serve_helpers import Served

from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.local import LocalEngine
from posttrain.models.tiny import build_tiny_model, build_tokenizer
from posttrain.serve.app import create_app

TEXTS = [f"step {i}: grep -n needle file_{i}.txt | sort | uniq -c" for i in range(40)]
PROMPTS = [" ".join(TEXTS[i : i + 6]) for i in range(0, 24, 6)]  # each well over one 16-token KV block


@pytest.fixture(scope="module")
def tiny():
    tok = build_tokenizer(TEXTS, vocab_size=300)
    return build_tiny_model(len(tok), seed=0), tok  # untrained: small logit margins, a hard case


def greedy_twice(served: Served, prompt: str) -> tuple[list, list, int]:
    """(cold tokens, cached tokens, prompt tokens the second request took from the prefix cache)."""
    body = {"model": "tiny", "prompt": prompt, "max_tokens": 24, "temperature": 0}
    cold = httpx.post(f"{served.url}/completions", json=body, timeout=120).json()["choices"][0]["token_ids"]
    hits = served.server_state.engine.blocks.hit_tokens
    warm = httpx.post(f"{served.url}/completions", json=body, timeout=120).json()["choices"][0]["token_ids"]
    return cold, warm, served.server_state.engine.blocks.hit_tokens - hits


def run(tiny, dtype: str) -> list[tuple[list, list, int]]:
    model, tok = tiny
    served = Served(create_app(LocalEngine(model, tok, config=EngineConfig(dtype=dtype)), "tiny"))
    try:
        card = httpx.get(f"{served.url}/models").json()["data"][0]
        assert card["posttrain"]["dtype"] == dtype and card["posttrain"]["dtype_reason"] == "asked"
        return [greedy_twice(served, p) for p in PROMPTS]
    finally:
        served.close()


def test_fp32_greedy_repeats_when_the_prefix_is_cached(tiny):
    for cold, warm, cached in run(tiny, "float32"):
        assert cached > 0, "the second request did not hit the prefix cache"
        assert cold == warm


def test_bf16_greedy_is_recorded_not_asserted(tiny, capsys):
    results = run(tiny, "bfloat16")
    assert all(cached > 0 for _, _, cached in results)
    differ = sum(cold != warm for cold, warm, _ in results)
    with capsys.disabled():
        print(f"\nbf16: cold and prefix-cached greedy replies differ on {differ} of {len(results)} prompts")


def test_seed_rows_travel_over_http_and_sample_as_the_embedded_engine_does(tiny):
    from posttrain.engine.base import SamplingParams
    from posttrain.engine.clients.openai import RemoteEngine

    model, tok = tiny
    local = LocalEngine(model, tok)
    prompts = [tok.encode(p)[:20] for p in PROMPTS[:2]]
    params = SamplingParams(max_tokens=10, seed=3, seed_rows=[11, 5])
    served = Served(create_app(LocalEngine(model, tok), "tiny"))
    remote = RemoteEngine(served.base, "tiny")
    try:
        over_http = remote.generate(prompts, params)
        assert [c.token_ids for c in over_http] == [c.token_ids for c in local.generate(prompts, params)]
        alone = remote.generate(prompts[1:], SamplingParams(max_tokens=10, seed=3, seed_rows=[5]))
        assert alone[0].token_ids == over_http[1].token_ids
        bad = httpx.post(f"{served.url}/completions", timeout=60, json={
            "model": "tiny", "prompt": prompts, "max_tokens": 2, "seed": 3, "seed_rows": [1]})
        assert bad.status_code == 400 and "seed_rows" in bad.text
    finally:
        remote.close()
        served.close()
