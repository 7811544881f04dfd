"""Replay: logged calls re-sent to a variant; flips counted on repeatable (seeded/greedy) calls."""

import subprocess
import sys
import time

import httpx
from gateway_servers import backend, free_port, gateway, running, toml_config

from posttrain.gateway.replay import replay


def test_replay_counts_flips_only_where_outputs_can_repeat(tmp_path):
    b1, b2, g = free_port(), free_port(), free_port()
    db = tmp_path / "audit.sqlite"
    (tmp_path / "g.toml").write_text(toml_config(g, db, {"standard": [b1], "other": [b2]}))
    url = f"http://127.0.0.1:{g}/v1"
    with running(backend(b1, serves=["standard"]), backend(b2, serves=["other"]), gateway(tmp_path / "g.toml", g)):
        for seed in (1, 2, 3):
            httpx.post(f"{url}/chat/completions", json={"model": "standard", "seed": seed, "max_tokens": 3,
                                                          "messages": [{"role": "user", "content": "hi"}]})
        httpx.post(f"{url}/completions", json={"model": "standard", "prompt": "x", "max_tokens": 3})  # unseeded
        time.sleep(0.3)  # the audit writer flushes every 20 ms
        same = replay(str(db), url, "standard").summary()
        assert same["replayed"] == 4 and same["comparable"] == 3 and same["flips"] == 0
        # the scripted backends answer with their own name, so every repeatable call flips on `other`
        other = replay(str(db), url, "other", limit=4).summary()
        assert other["flips"] == 3 and other["errors"] == 0 and len(other["flipped_ids"]) == 3
        # nothing replayable (here: an unknown variant) is a failure naming the first error, never `+nan ms` and 0
        cli = subprocess.run([sys.executable, "-m", "posttrain", "gateway", "replay", str(db), "--against", "nope",
                              "--gateway-url", url], capture_output=True, text=True, timeout=120)
        assert cli.returncode != 0 and "nothing could be replayed" in cli.stdout + cli.stderr
        assert "nan" not in cli.stdout


def test_replay_warns_in_one_line_when_the_variant_runs_bf16(tmp_path):
    b16, b32, g = free_port(), free_port(), free_port()
    db = tmp_path / "audit.sqlite"
    (tmp_path / "g.toml").write_text(toml_config(g, db, {"standard": [b32], "other": [b16]}))
    url = f"http://127.0.0.1:{g}/v1"
    served = [backend(b32, "--dtype", "float32", serves=["standard"]), backend(b16, "--dtype", "bfloat16", serves=["other"])]
    with running(*served, gateway(tmp_path / "g.toml", g)):
        httpx.post(f"{url}/completions", json={"model": "standard", "prompt": "x", "max_tokens": 3, "temperature": 0})
        time.sleep(0.3)  # the audit writer flushes every 20 ms

        def cli(variant):
            return subprocess.run([sys.executable, "-m", "posttrain", "gateway", "replay", str(db), "--against", variant,
                                   "--gateway-url", url], capture_output=True, text=True, timeout=120)

        bf16 = cli("other")
        warnings = [line for line in bf16.stderr.splitlines() if line.startswith("warning:")]
        assert bf16.returncode == 0 and len(warnings) == 1, bf16.stderr
        assert f"127.0.0.1:{b16}/v1 runs bfloat16" in warnings[0] and "--dtype float32" in warnings[0]
        fp32 = cli("standard")
        assert fp32.returncode == 0 and "warning" not in fp32.stderr, fp32.stderr
