"""What machine a result was measured on: CPU model, the flags that change speed and rounding
(AVX2, AVX-512, BF16, AMX), cores. Recorded in every summary, report and benchmark JSON."""

from __future__ import annotations

import os
import platform
from pathlib import Path

# The flags that decide which kernels run, and so the speed and the float rounding.
KEY_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile",
             "amx_bf16", "amx_int8")


def _cpuinfo() -> dict[str, str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    first = text.split("\n\n", 1)[0]
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in first.splitlines())}


def cpu_info() -> dict:
    """{"model", "flags" (the KEY_FLAGS present), "all_flags", "cores", "machine"}."""
    info = _cpuinfo()
    flags = info.get("flags", "").split()
    return {"model": info.get("model name") or platform.processor() or "unknown",
            "flags": [f for f in KEY_FLAGS if f in flags], "all_flags": " ".join(flags),
            "cores": len(os.sched_getaffinity(0)), "machine": platform.machine()}


BF16_FLAGS = ("avx512_bf16", "amx_bf16")   # bf16 dot products in hardware


def cpu_has_bf16(flags: str | None = None) -> bool:
    """Whether this CPU (or the space-separated `flags` given) computes bf16 in hardware."""
    present = set((cpu_info()["all_flags"] if flags is None else flags).split())
    return bool(present & set(BF16_FLAGS))


def cpu_line(cpu: dict | None = None) -> str:
    """One line for tables and reports: model, key flags, cores."""
    c = cpu or cpu_info()
    return f"{c['model']} ({', '.join(c['flags']) or 'no AVX2'}; {c['cores']} cores)"
