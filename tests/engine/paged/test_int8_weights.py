"""Weight-only int8 linears (EngineConfig(weights="int8")): rounding, both kernels, weight updates, the engine."""

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.int8 import INT8_ROWS, Int8Linear, quantize
from posttrain.engine.paged.local import LocalEngine
from posttrain.train.logprobs import token_logprobs

needs_bf16 = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="oneDNN bf16 kernels missing")


def test_quantize_rounds_each_channel_to_its_own_scale():
    w = torch.randn(6, 32, generator=torch.Generator().manual_seed(0)) * torch.arange(1, 7).view(6, 1)
    w[2] = 0  # an all-zero channel stays zero (no division by a zero scale)
    q, scale = quantize(w)
    assert q.dtype == torch.int8 and q.abs().max() == 127
    assert torch.equal(q[2], torch.zeros(32, dtype=torch.int8))
    assert ((q.float() * scale[:, None] - w).abs() <= scale[:, None] / 2 + 1e-6).all()


def _fused(bias: bool) -> tuple[Int8Linear, torch.Tensor]:
    torch.manual_seed(0)
    parts = [torch.nn.Linear(64, n, bias=bias).bfloat16() for n in (48, 16, 16)]
    with torch.no_grad():
        for p in parts:
            p.weight[:, 0] = 4.0  # an outlier per channel: a coarse scale, so rounding shows above bf16's
    return Int8Linear(*parts), torch.cat([p.weight for p in parts])


@needs_bf16
@pytest.mark.parametrize("bias", [False, True])
def test_few_and_many_rows_multiply_by_the_same_int8_weights(bias):
    lin, w = _fused(bias)
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(1)).bfloat16()
    with torch.inference_mode():
        many = lin(x).float()  # packed bf16 GEMM on the dequantized weights
        few = torch.cat([lin(x[i : i + 1]) for i in range(8)]).float()  # the int8 kernel
        q, scale = quantize(w)
        b = torch.cat([s.bias.float() for s in lin.sources]) if bias else 0
        ref = x.float() @ (q.float() * scale[:, None]).T + b
        unrounded = (x.float() @ w.float().T + b - ref).abs().max()
    assert INT8_ROWS >= 1 and many.shape == few.shape == (8, 80)
    assert (many - ref).abs().max() < unrounded / 4 and (few - ref).abs().max() < unrounded / 4


@needs_bf16
def test_an_in_place_weight_update_requantizes():
    lin, _ = _fused(False)
    x = torch.ones(1, 64, dtype=torch.bfloat16)
    with torch.inference_mode():
        before = lin(x)
    with torch.no_grad():
        lin.sources[0].weight.mul_(2)
    with torch.inference_mode():
        after = lin(x)
    assert torch.allclose(after[:, :48].float(), 2 * before[:, :48].float(), rtol=0.02)
    assert torch.equal(after[:, 48:], before[:, 48:])


@needs_bf16
def test_an_int8_engine_samples_close_to_the_trainer(model):
    engine = LocalEngine(model, config=EngineConfig(dtype="bfloat16", weights="int8"))
    assert isinstance(engine.runner.linears[0]["qkv"], Int8Linear)
    prompts = [[1, 3, 40, 41], [1, 5, 6, 7, 8, 9, 10]]
    for group in ([prompts[0]], prompts * 2):  # one row: the int8 kernel; four rows: the dequantized GEMM
        out = engine.generate(group, SamplingParams(temperature=1.0, max_tokens=8, seed=0))
        for p, c in zip(group, out):
            ids = torch.tensor([p + c.token_ids])
            with torch.no_grad():
                ref = token_logprobs(model, ids, torch.ones_like(ids), 1.0)[0, len(p):]
            assert (ref - torch.tensor(c.logprobs)).abs().max() < 0.1


def test_int8_weights_need_bf16_compute(model):
    with pytest.raises(ValueError, match="needs bfloat16 compute"):
        LocalEngine(model, config=EngineConfig(dtype="float32", weights="int8"))
    with pytest.raises(ValueError, match="weights must be"):
        EngineConfig(weights="int4")
