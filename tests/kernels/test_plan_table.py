"""The kernel plan (kernels/plan.py) as a table: CPU flags x dtype x options -> the linears' variants
by row count, attention, and whether greedy replies hold cold vs cached (the engine that runs it:
tests/engine/paged/test_kernel_plan.py)."""

import pytest

from posttrain.kernels import gemv
from posttrain.kernels.plan import PlanOptions, kernel_plan

AVX2 = frozenset({"sse4_2", "avx", "avx2", "fma", "f16c"})
AVX512 = AVX2 | {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd", "avx512_vnni"}
ZEN4 = AVX512 | {"avx512_bf16", "avx512vbmi", "avx512_vbmi2"}
ZEN5 = ZEN4 | {"avx_vnni", "avx512_vp2intersect"}
XEON_AMX = ZEN4 | {"amx_tile", "amx_bf16", "amx_int8", "avx512_fp16"}  # Sapphire Rapids and later
NO_VBMI = AVX512 | {"avx512_bf16"}

ALL = "1+"
DEFAULT, EXACT = PlanOptions(), PlanOptions(batch_invariant=True)
VLLM = PlanOptions(attention="vllm-cpu")
INT8 = PlanOptions(weights="int8")

# (flags, dtype, options) -> (cpu, {row span: variant}, attention, greedy prefix invariant)
TABLE = [
    (ZEN4, "float32", DEFAULT, "avx512_bf16", {ALL: "gemv:fp32"}, "torch", False),
    (ZEN4, "bfloat16", DEFAULT, "avx512_bf16", {ALL: "gemv:bf16"}, "torch", False),
    (ZEN4, "bfloat16", VLLM, "avx512_bf16", {ALL: "gemv:bf16"}, "vllm-cpu", True),
    (ZEN4, "float32", EXACT, "avx512_bf16", {ALL: "mkl"}, "torch-float64", True),
    (ZEN4, "bfloat16", INT8, "avx512_bf16", {"1-32": "gemv:int8_lut", "33+": "onednn"}, "torch", False),
    (ZEN5, "bfloat16", VLLM, "avx512_bf16", {ALL: "gemv:bf16"}, "vllm-cpu", True),
    (ZEN5, "float32", DEFAULT, "avx512_bf16", {ALL: "gemv:fp32"}, "torch", False),
    (NO_VBMI, "bfloat16", INT8, "avx512_bf16", {"1-8": "gemv:int8", "9+": "onednn"}, "torch", False),
    (XEON_AMX, "bfloat16", DEFAULT, "amx", {ALL: "onednn"}, "torch", False),
    (XEON_AMX, "bfloat16", VLLM, "amx", {ALL: "vllm"}, "vllm-cpu", False),
    (XEON_AMX, "float32", DEFAULT, "amx", {ALL: "mkl"}, "torch", False),
    (XEON_AMX, "float32", PlanOptions(fp32_gemm="onednn"), "amx", {ALL: "onednn"}, "torch", False),
    (XEON_AMX, "float32", EXACT, "amx", {ALL: "mkl"}, "torch-float64", True),
    (XEON_AMX, "bfloat16", INT8, "amx", {"1-32": "gemv:int8_lut", "33+": "onednn"}, "torch", False),
    (AVX512, "float32", DEFAULT, "avx512", {ALL: "gemv:fp32"}, "torch", False),
    (AVX512, "bfloat16", DEFAULT, "avx512", {ALL: "onednn"}, "torch", False),
    (AVX2, "float32", DEFAULT, "avx2", {ALL: "mkl"}, "torch", False),
    (AVX2, "bfloat16", INT8, "avx2", {"1-2": "aten_int8", "3+": "onednn"}, "torch", False),
    (ZEN4, "float32", PlanOptions(gemv_off=True), "avx512_bf16", {ALL: "mkl"}, "torch", False),
    (ZEN4, "float32", PlanOptions(packed=False, device="cuda"), "cuda", {ALL: "f_linear"}, "torch", False),  # a GPU's plan
]


@pytest.mark.parametrize("flags,dtype,options,cpu,linear,attention,invariant", TABLE)
def test_the_plan_table(flags, dtype, options, cpu, linear, attention, invariant):
    plan = kernel_plan(dtype, flags, options)
    d = plan.as_dict()
    assert (d["cpu"], d["linear"], d["attention"], d["greedy_prefix_invariant"]) == (cpu, linear, attention, invariant)
    assert plan.reason and ("guarantees it" in plan.reason) != invariant  # a withdrawn promise names the fix
    assert plan.line().startswith(f"kernel plan ({cpu}, {dtype}")


def test_on_amx_bf16_and_fp32_leave_our_kernels_and_say_why_greedy_replies_may_differ():
    for dtype in ("float32", "bfloat16"):
        plan = kernel_plan(dtype, XEON_AMX, VLLM)
        assert plan.gemv is None and not plan.greedy_prefix_invariant and "AMX" in plan.reason
    zen = kernel_plan("bfloat16", ZEN4, VLLM)
    assert zen.gemv == "bf16" and zen.gemv_rows == gemv.ALL_ROWS  # prefill and decode on one kernel

