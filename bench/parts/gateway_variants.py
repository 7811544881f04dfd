"""bench/gateway.py's variant section: posttrain serve as standard, speculative (n-gram) and int8-KV
variants behind one gateway; tokens/s at batch 1 and 8, greedy identity, and a paired eval."""

from __future__ import annotations

import random
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from parts.gateway_procs import Proc, free_port, gateway, toml_config

from posttrain.gateway.canary import decide

VARIANTS = {"standard": [], "fast": ["--spec", "ngram"], "int8": ["--kv-dtype", "int8"]}
VARIANTS_DTYPE = "float32"
CODE = ("def merge(a, b):\n    out = []\n    i = j = 0\n    while i < len(a) and j < len(b):\n"
        "        if a[i] <= b[j]:\n            out.append(a[i]); i += 1\n        else:\n"
        "            out.append(b[j]); j += 1\n    return out + a[i:] + b[j:]\n")
WORDS = "apple river stone cloud maple tiger lemon piano rocket garden silver candle orbit meadow".split()


def model_dir(tmp: Path) -> tuple[str, str]:
    """SmolLM2-135M-Instruct if imported (posttrain models import), else an in-process tiny model."""
    smol = Path.home() / ".cache/posttrain/models/smollm2-135m-instruct"
    if (smol / "config.json").exists():
        return str(smol), "smollm2-135m-instruct"
    from posttrain.models.tiny import build_tiny_model, build_tokenizer, save_policy

    tok = build_tokenizer([CODE * 3] * 20, vocab_size=512)
    save_policy(build_tiny_model(len(tok), preset="small", seed=0), tok, tmp / "tiny")
    return str(tmp / "tiny"), "tiny-small"


def serve(port: int, model: str, name: str, flags: list[str]) -> Proc:
    """fp32: speculation is exact there; in bf16 (the `auto` choice on AMX CPUs) verifying k tokens
    at once rounds differently from decoding them one by one, and greedy outputs can flip."""
    args = [sys.executable, "-m", "posttrain", "serve", "--model", model, "--port", str(port), "--name", name,
            "--threads", "1", "--dtype", VARIANTS_DTYPE, *flags]
    return Proc(args, f"http://127.0.0.1:{port}/health", ready_timeout_s=600)


def complete(client: httpx.Client, url: str, variant: str, prompt: str, max_tokens: int, seed=0, temperature=0.0) -> dict:
    body = {"model": variant, "prompt": prompt, "max_tokens": max_tokens, "temperature": temperature, "seed": seed}
    r = client.post(url, json=body)
    r.raise_for_status()
    return r.json()


def throughput(url: str, variant: str, prompts: list[str], max_tokens: int, batch: int) -> tuple[float, list]:
    """(generated tokens/s, token ids per prompt) with `batch` requests in flight."""
    import time

    with httpx.Client(timeout=600) as client, ThreadPoolExecutor(batch) as pool:
        t0 = time.perf_counter()
        outs = list(pool.map(lambda p: complete(client, url, variant, p, max_tokens), prompts))
        wall = time.perf_counter() - t0
    tokens = sum(o["usage"]["completion_tokens"] for o in outs)
    return tokens / wall, [o["choices"][0].get("token_ids") for o in outs]


def copy_suite(n_tasks: int) -> list[tuple[str, str]]:
    rng = random.Random(0)
    tasks = []
    for _ in range(n_tasks):
        words = " ".join(rng.sample(WORDS, 4))
        tasks.append((f"Repeat these words exactly: {words}\nWords: {words}\nRepeat: {words}\nRepeat:", words))
    return tasks


def paired_eval(url: str, candidate: str, baseline: str, n_tasks: int, k: int, margin: float) -> dict:
    """Score each copy task k times (temperature 0.7, seeds 0..k-1) on both variants; decide."""
    suite = copy_suite(n_tasks)
    scores: dict[str, dict[str, list[float]]] = {candidate: {}, baseline: {}}
    with httpx.Client(timeout=600) as client, ThreadPoolExecutor(8) as pool:
        for variant in scores:
            jobs = [(t, s) for t in range(n_tasks) for s in range(k)]
            outs = pool.map(lambda ts: complete(client, url, variant, suite[ts[0]][0], 12, ts[1], 0.7), jobs)
            for (t, _), out in zip(jobs, outs):
                hit = out["choices"][0]["text"].strip().startswith(suite[t][1])
                scores[variant].setdefault(f"copy{t}", []).append(float(hit))
    return decide(candidate, baseline, scores[candidate], scores[baseline], margin).to_dict()


def bench_variants(quick: bool) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="gw-variants-"))
    model, model_name = model_dir(tmp)
    ports = {v: free_port() for v in VARIANTS}
    g = free_port()
    extra = '[canary]\ncandidate = "int8"\nbaseline = "standard"\nshare = 0.0\nmargin = 0.1\n'
    cfg = toml_config(g, tmp / "audit.sqlite", {v: [p] for v, p in ports.items()}, extra=extra, timeout_s=600.0)
    (tmp / "gw.toml").write_text(cfg)
    procs = [serve(p, model, v, VARIANTS[v]).start() for v, p in ports.items()]
    procs.append(gateway(tmp / "gw.toml", g).start())
    url = f"http://127.0.0.1:{g}/v1/completions"
    max_tokens = 32 if quick else 64
    prompts = [f"# file {i}\n{CODE}\n# the same function again, verbatim:\n{CODE[: 40 + 10 * i]}" for i in range(8)]
    out: dict = {"variants_model": model_name, "variants_max_tokens": max_tokens, "variants_dtype": VARIANTS_DTYPE}
    try:
        ids = {}
        for batch, chosen in ((1, prompts[:4] if quick else prompts), (8, prompts)):
            for v in VARIANTS:
                tps, ids[(v, batch)] = throughput(url, v, chosen, max_tokens, batch)
                out[f"tokens_per_s_{v}_batch{batch}"] = tps
                print(f"[variants] {v} batch {batch}: {tps:.1f} tok/s", flush=True)
            for v in ("fast", "int8"):
                out[f"{v}_vs_standard_batch{batch}"] = out[f"tokens_per_s_{v}_batch{batch}"] / out[f"tokens_per_s_standard_batch{batch}"]
        pairs = [(ids[("standard", b)], ids[(v, b)]) for b in (1, 8) for v in ("fast",)]
        out["greedy_identical_fast"] = sum(a == b for s, f in pairs for a, b in zip(s, f))
        out["greedy_probes_fast"] = sum(len(s) for s, _ in pairs)
        out["int8_greedy_flips"] = sum(a != b for a, b in zip(ids[("standard", 8)], ids[("int8", 8)]))
        decision = paired_eval(f"http://127.0.0.1:{g}/v1/completions", "int8", "standard",
                               12 if quick else 30, 3, margin=0.1)
        httpx.post(f"http://127.0.0.1:{g}/v1/gateway/canary", json=decision, timeout=30).raise_for_status()
        out["int8_paired_eval"] = decision
        print(f"[variants] int8 paired eval: {decision['decision']}: {decision['reason']}", flush=True)
    finally:
        for p in reversed(procs):
            p.stop()
    out["fast_vs_standard_batch1"] = out.get("fast_vs_standard_batch1")
    return out
