"""The engine's linears on the decode GEMVs (kernels/packed.py, engine/paged/int8.py): few rows take
the GEMV, fused q/k/v included, an in-place weight update is read by the next call, and a CPU
without the ISA keeps the GEMM path and says so (the engine: tests/engine/paged/test_gemv_engine.py)."""

import logging

import pytest
import torch
import torch.nn.functional as F

from posttrain.engine.paged.int8 import Int8Linear, quantize
from posttrain.kernels import gemv
from posttrain.kernels.packed import PackedLinear


def has_gemv(kind: str) -> bool:
    """Whether this CPU runs the `kind` GEMV (and then the module must have built)."""
    if gemv.missing_flags(kind):
        return False
    assert gemv.module() is not None, "the CPU has the ISA but the GEMV module did not build (see the log)"
    return True

def fused(dtype: torch.dtype, bias: bool = True) -> list[torch.nn.Linear]:
    torch.manual_seed(0)
    return [torch.nn.Linear(72, n, bias=bias).to(dtype) for n in (40, 13, 13)]  # q/k/v-like, N off 16


def reference(parts: list[torch.nn.Linear], x: torch.Tensor) -> torch.Tensor:
    w = torch.cat([p.weight for p in parts]).double()
    b = torch.cat([p.bias for p in parts]).double()
    return F.linear(x.double(), w, b)


@pytest.mark.parametrize("dtype,kind", [(torch.float32, "fp32"), (torch.bfloat16, "bf16")])
def test_every_row_count_takes_the_kernel_and_matches_the_gemm(dtype, kind):
    parts = fused(dtype)
    lin, gemm = PackedLinear(*parts, gemv=True), PackedLinear(*parts)
    x = torch.randn(300, 72).to(dtype)  # decode's 1 row, and a prefill of more than a pass's 256 rows
    with torch.inference_mode():
        few, many, by_gemm = lin(x[:1]), lin(x), gemm(x)
        ref = reference(parts, x)
    assert (lin.gemv is not None) == has_gemv(kind)
    if lin.gemv is not None:  # prefill and decode round a row alike
        assert lin.gemv_rows == gemv.ALL_ROWS and torch.equal(few[0], many[0])
    rel = 1e-5 if dtype == torch.float32 else 2.0**-7
    for y in (few, many, by_gemm):
        assert ((y.double() - ref[: len(y)]).abs() <= rel * ref[: len(y)].abs() + 1e-4).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_an_in_place_weight_update_is_read_by_the_next_call(dtype):
    single = torch.nn.Linear(72, 40).to(dtype)
    for parts in ([single], fused(dtype)):  # the parameter itself, and a fused concatenation of several
        lin = PackedLinear(*parts, gemv=True)
        x = torch.randn(1, 72).to(dtype)
        with torch.inference_mode():
            lin(x)
        packed = lin.gemv_weights
        with torch.no_grad():
            parts[0].weight.mul_(-2)
            parts[0].bias.add_(1)
        with torch.inference_mode():
            after = lin(x)
            ref = reference(parts, x)
        assert ((after.double() - ref).abs() <= 2.0**-7 * ref.abs() + 1e-4).all()
        if packed is not None:  # the GEMV's copy is repacked in place, not cut again from the arena
            assert lin.gemv_weights.data.data_ptr() == packed.data.data_ptr()


def test_int8_few_rows_take_the_int8_gemv_on_the_same_rounding():
    parts = fused(torch.bfloat16)
    lin = Int8Linear(*parts, gemv=True)
    x = torch.randn(2, 72).bfloat16()
    with torch.inference_mode():
        y = lin(x)
    q, scale = quantize(torch.cat([p.weight for p in parts]))
    b = torch.cat([p.bias for p in parts]).double()
    ref = F.linear(x.double(), q.double()) * scale.bfloat16().double() + b
    kind = gemv.kernel_for(torch.int8).kind if lin.gemv else None
    assert (lin.gemv is not None) == has_gemv("int8") and lin.gemv_rows == gemv.DECODE_ROWS.get(kind, 0)
    assert ((y.double() - ref).abs() <= 2.0**-7 * ref.abs() + 1e-3).all()
    with torch.no_grad():
        parts[1].weight.mul_(3)
    with torch.inference_mode():
        again = lin(x)  # requantized: k's rows tripled (their own scales), q's and v's unchanged
    assert torch.equal(again[:, :40], y[:, :40]) and torch.equal(again[:, 53:], y[:, 53:])
    kb = parts[1].bias.float()
    assert torch.allclose(again[:, 40:53].float() - kb, 3 * (y[:, 40:53].float() - kb), rtol=0.02, atol=0.05)


def test_a_cpu_without_the_isa_keeps_the_gemm_path_and_says_so(no_avx512, caplog):
    parts = fused(torch.bfloat16)
    lin = PackedLinear(*parts, gemv=True)
    x = torch.randn(1, 72).bfloat16()
    with caplog.at_level(logging.WARNING, logger="posttrain.kernels.gemv"), torch.inference_mode():
        y = lin(x)
        ref = PackedLinear(*parts)(x)
    assert lin.gemv is None and torch.equal(y, ref)
    assert "missing on this CPU" in caplog.text and "keep their GEMM path" in caplog.text


def test_int8_without_vbmi_takes_the_widening_kernel(monkeypatch):
    flags = frozenset(f for f in gemv.cpu_flags() if f != "avx512vbmi")
    monkeypatch.setattr(gemv, "cpu_flags", lambda: flags)
    kernel = gemv.kernel_for(torch.int8)
    assert kernel is None or kernel.kind == "int8"
    parts = fused(torch.bfloat16)
    x = torch.randn(1, 72).bfloat16()
    with torch.inference_mode():
        y = Int8Linear(*parts, gemv=True)(x)
    q, scale = quantize(torch.cat([p.weight for p in parts]))
    ref = F.linear(x.double(), q.double()) * scale.bfloat16().double() + torch.cat([p.bias for p in parts]).double()
    assert ((y.double() - ref).abs() <= 2.0**-7 * ref.abs() + 1e-3).all()


def test_invalidating_a_gemv_linear_invalidates_the_gemm_behind_it():
    """update_weights invalidates (inference tensors have no version counter): both copies repack."""
    from posttrain.kernels.gemv_linear import GemvLinear
    from posttrain.kernels.packed import OneDnnLinear

    lin = GemvLinear(*fused(torch.float32), rest=OneDnnLinear)
    with torch.inference_mode():
        lin(torch.randn(2, 72)), lin.rest(torch.randn(2, 72))
    assert lin.key is not None and lin.rest.key is not None
    lin.invalidate()
    assert lin.key is None and lin.rest.key is None
