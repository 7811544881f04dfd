"""The device a run computes on, chosen once: `device = "auto" | "cpu" | "cuda" | "cuda:N"`
resolved to a torch.device (CUDA where torch sees one, else the CPU), and the record of that
choice that summary.json keeps (docs/gpu.md). Everything downstream takes its tensors' device
from the module it runs (`module_device`), never from this setting again."""

from __future__ import annotations

import re
from typing import Annotated

import torch
from pydantic import AfterValidator

from posttrain.errors import ConfigError
from posttrain.machine import cpu_has_bf16

DEVICE_PATTERN = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


def check_device(setting: str) -> str:
    """The setting itself, or ValueError for anything but auto, cpu, cuda and cuda:N (config
    validators call this; it does not look for a GPU)."""
    if not DEVICE_PATTERN.match(setting):
        raise ValueError(f"device must be auto, cpu, cuda or cuda:N, not {setting!r}")
    return setting


# A config key's type: `device: Device = "auto"`, checked when the config is built.
Device = Annotated[str, AfterValidator(check_device)]


def resolve_device(setting: str = "auto") -> torch.device:
    """torch.device for a setting: "auto" is cuda where `torch.cuda.is_available()`, else cpu;
    "cuda" or "cuda:N" without CUDA (or past the GPUs there are), or any other string, is a
    ConfigError."""
    try:
        check_device(setting)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    cuda = torch.cuda.is_available()
    if setting == "auto":
        return torch.device("cuda" if cuda else "cpu")
    device = torch.device(setting)
    if device.type == "cuda":
        if not cuda:
            raise ConfigError(f"device = {setting!r}, but torch sees no CUDA GPU here (torch "
                              f"{torch.__version__}, built for CUDA {torch.version.cuda or 'none'}); "
                              "use device = \"auto\" or \"cpu\"")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"device = {setting!r}, but torch sees {torch.cuda.device_count()} GPU(s)")
    return device


def module_device(module) -> torch.device:
    """Where a module's parameters live: what its inputs and scratch tensors follow."""
    return next(module.parameters()).device


def device_record(device: torch.device | str) -> dict:
    """summary.json's "device": {"device", "gpu" (its name, or None on a CPU), "bf16" (whether
    bf16 compute is native there: the GPU's report, or the CPU's AVX-512-BF16/AMX flags)}."""
    device = torch.device(device)
    if device.type == "cuda":
        return {"device": str(device), "gpu": torch.cuda.get_device_name(device),
                "bf16": bool(torch.cuda.is_bf16_supported())}
    return {"device": str(device), "gpu": None, "bf16": cpu_has_bf16()}
