"""The trainer's compute dtype: bf16 autocast around the forward, with fp32 master weights and
an fp32 optimizer, where the CPU has native bf16 matmuls (AVX-512-BF16 or AMX-BF16) or the GPU
reports bf16 support; fp32 elsewhere. Chosen once when the trainer is built (OptimConfig.compute_dtype)."""

from __future__ import annotations

import contextlib
import functools
from typing import Callable, Literal

import torch

from posttrain.machine import cpu_has_bf16

ComputeDtype = Literal["auto", "fp32", "bf16"]


def resolve_dtype(setting: ComputeDtype, flags: str | None = None, device: str = "cpu") -> str:
    """"fp32" or "bf16": the setting, or for "auto" bf16 where `flags` (this CPU's, from
    /proc/cpuinfo, unless given) include AVX-512-BF16 or AMX-BF16; on a CUDA device, where
    `torch.cuda.is_bf16_supported()`."""
    if setting != "auto":
        return setting
    if device == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if cpu_has_bf16(flags) else "fp32"


def compute_context(dtype: str, device: str = "cpu") -> Callable[[], contextlib.AbstractContextManager]:
    """A factory of the context the forward runs in: autocast to bf16, or nothing (fp32). The
    parameters and the optimizer stay fp32; the backward follows the ops autocast recorded."""
    if dtype == "bf16":
        return functools.partial(torch.autocast, device, dtype=torch.bfloat16)
    return contextlib.nullcontext
