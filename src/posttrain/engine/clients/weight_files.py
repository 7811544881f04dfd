"""Stage a state dict as a safetensors directory for an engine server to load, on one host in
shared memory (/dev/shm), removed as soon as every replica has loaded it."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file


def shm_root() -> Path:
    """/dev/shm where it exists (no disk I/O), else the temp dir; $POSTTRAIN_SHM overrides."""
    if os.environ.get("POSTTRAIN_SHM"):
        return Path(os.environ["POSTTRAIN_SHM"])
    return Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())


def unique_tensors(state_dict: dict) -> dict[str, torch.Tensor]:
    """One entry per storage: a tied lm_head shares the embedding's memory, and safetensors
    refuses shared tensors (the engine re-ties them itself)."""
    seen, out = set(), {}
    for name, t in state_dict.items():
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
        if key in seen:
            continue
        seen.add(key)
        out[name] = t.detach().contiguous()
    return out


def prefix_for(pid: int | None = None) -> str:
    """Name prefix of every directory this process stages (the watchdog removes them)."""
    return f"posttrain-vllm-weights-{pid or os.getpid()}-"


@contextlib.contextmanager
def staged_weights(state_dict: dict):
    """Yield (directory, bytes) of a fresh safetensors copy of state_dict; removed on exit."""
    path = Path(tempfile.mkdtemp(prefix=prefix_for(), dir=shm_root()))
    try:
        tensors = unique_tensors(state_dict)
        save_file(tensors, str(path / "model.safetensors"))
        yield path, sum(t.numel() * t.element_size() for t in tensors.values())
    finally:
        shutil.rmtree(path, ignore_errors=True)


def remove_staged(pid: int) -> None:
    """Remove what a (dead) process with this pid left staged."""
    for p in shm_root().glob(prefix_for(pid) + "*"):
        shutil.rmtree(p, ignore_errors=True)
