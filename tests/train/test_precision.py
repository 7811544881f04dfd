"""The trainer's compute dtype (train/precision.py, optim.compute_dtype): "auto" resolves by
the CPU's flags; a bf16 step's loss and gradients are the fp32 step's to bf16 rounding, with
fp32 weights and optimizer state."""

import copy

import pytest
import torch

from posttrain.train.precision import resolve_dtype
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig

from test_prompt_sharing import _groups, _model


@pytest.mark.parametrize("flags, want", [
    ("fpu sse avx2 avx512f avx512bw", "fp32"),
    ("fpu avx2 avx512f avx512_bf16", "bf16"),
    ("fpu avx2 amx_tile amx_bf16", "bf16"),
    ("", "fp32"),
])
def test_auto_resolves_by_the_cpu_flags(flags, want):
    assert resolve_dtype("auto", flags) == want
    assert resolve_dtype("fp32", flags) == "fp32" and resolve_dtype("bf16", flags) == "bf16"


def _step(dtype: str, kind: str, chunk: int = 0):
    model = _model()
    trainer = PolicyTrainer(model, 0, OptimConfig(lr=1e-3, compute_dtype=dtype, logprob_chunk=chunk))
    episodes = copy.deepcopy(_groups(2, 4, True))
    stats = trainer.rl_step(episodes, RLConfig()) if kind == "rl" else trainer.sft_step(episodes)
    assert trainer.setup["compute_dtype"] == dtype
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert all(v.dtype == torch.float32 for s in trainer.optimizer.state.values() for v in s.values()
               if v.is_floating_point())
    return stats, torch.cat([p.grad.reshape(-1) for p in model.parameters()])


@pytest.mark.parametrize("kind", ["rl", "sft"])
@pytest.mark.parametrize("chunk", [0, 4])
def test_a_bf16_step_is_the_fp32_step_to_bf16_rounding(kind, chunk):
    (s32, g32), (s16, g16) = _step("fp32", kind), _step("bf16", kind, chunk)
    assert s16["loss"] == pytest.approx(s32["loss"], rel=2e-2, abs=2e-3)
    assert s16["loss"] != s32["loss"]  # bf16 did run
    cosine = torch.nn.functional.cosine_similarity(g32, g16, dim=0)
    assert cosine > 0.99
    assert (g16 - g32).norm() / g32.norm() < 0.1
