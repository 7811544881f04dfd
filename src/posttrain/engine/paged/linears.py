"""The engine's linears, built from its kernel plan (kernels/plan.py): one class per variant."""

from __future__ import annotations

from posttrain.engine.paged.int8 import Int8Linear
from posttrain.kernels.gemv_linear import GemvLinear
from posttrain.kernels.packed import GEMM_CLASSES
from posttrain.kernels.plan import KernelPlan


def linear_maker(plan: KernelPlan):
    """(*nn.Linear) -> the linear the plan names for them (several: fused, outputs side by side)."""
    gemm = GEMM_CLASSES[plan.gemm]
    if plan.weights == "int8":
        return lambda *mods: Int8Linear(*mods, kind=plan.gemv)
    if plan.gemv is not None:
        return lambda *mods: GemvLinear(*mods, rest=gemm, kind=plan.gemv)
    return gemm
