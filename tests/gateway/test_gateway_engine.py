"""The gateway in front of real `posttrain serve` processes: the speculative variant is lossless."""

import sys

import httpx
import pytest
from gateway_servers import Proc, free_port, gateway, running, toml_config

from posttrain.gateway.canary import probe_identity
from posttrain.models.tiny import build_tiny_model, build_tokenizer, save_policy

CODE = "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n"


@pytest.mark.slow
def test_speculative_variant_is_greedy_identical_through_the_gateway(tmp_path):
    tok = build_tokenizer([CODE * 4] * 20, vocab_size=300)
    save_policy(build_tiny_model(len(tok), seed=0), tok, tmp_path / "m")
    ports = {"standard": free_port(), "fast": free_port()}
    flags = {"standard": [], "fast": ["--spec", "ngram"]}
    serves = [Proc([sys.executable, "-m", "posttrain", "serve", "--model", str(tmp_path / "m"), "--port", str(p),
                   "--name", v, "--threads", "1", "--dtype", "float32", *flags[v]],  # greedy repeats in fp32
                   f"http://127.0.0.1:{p}/health", ready_timeout_s=300)
              for v, p in ports.items()]
    g = free_port()
    (tmp_path / "g.toml").write_text(toml_config(g, tmp_path / "a.sqlite", {v: [p] for v, p in ports.items()}))
    url = f"http://127.0.0.1:{g}/v1"
    with running(*serves, gateway(tmp_path / "g.toml", g)):
        prompts = [CODE * 2, CODE + CODE[:20], "print(add(", CODE[::-1]]
        assert probe_identity(url, "fast", url, "standard", prompts, max_tokens=24) == (4, 4)
        r = httpx.post(f"{url}/completions", json={"model": "fast", "prompt": CODE, "max_tokens": 8, "stream": True})
        assert r.status_code == 200 and r.text.rstrip().endswith("[DONE]")
