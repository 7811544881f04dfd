"""The compute dtype chosen from CPU flags, bf16 engines on their own copy, packed linears."""

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged import dtypes
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.local import LocalEngine
from posttrain.kernels import packed
from posttrain.kernels.packed import PackedLinear

AVX2_ONLY = ["fpu", "sse4_2", "avx2", "fma"]
SAPPHIRE = AVX2_ONLY + ["avx512f", "avx512_bf16", "amx_tile", "amx_bf16"]


def fake_cpu(monkeypatch, flags):
    """Fake /proc/cpuinfo's flags as machine.cpu_info reports them."""
    monkeypatch.setattr(dtypes, "cpu_info", lambda: {"all_flags": " ".join(flags)})


def test_auto_follows_the_cpu_flags(monkeypatch):
    fake_cpu(monkeypatch, AVX2_ONLY)
    assert dtypes.choose_dtype("auto") == dtypes.DtypeChoice("float32", "cpu lacks amx_bf16 and avx512_bf16")
    fake_cpu(monkeypatch, SAPPHIRE)
    assert dtypes.choose_dtype("auto") == dtypes.DtypeChoice("bfloat16", "cpu has amx_bf16+avx512_bf16")
    fake_cpu(monkeypatch, AVX2_ONLY + ["avx512_bf16"])
    assert dtypes.choose_dtype("auto").name == "bfloat16"
    assert dtypes.choose_dtype("float32") == dtypes.DtypeChoice("float32", "asked")
    with pytest.raises(ValueError, match="dtype must be"):
        dtypes.choose_dtype("float16")


def test_engine_on_an_avx2_cpu_stays_fp32_and_shares_the_model(monkeypatch, model):
    fake_cpu(monkeypatch, AVX2_ONLY)
    engine = LocalEngine(model, config=EngineConfig(dtype="auto"))
    assert engine.dtype.name == "float32" and engine.model is model


def test_engine_on_an_amx_cpu_runs_bf16_on_its_own_copy(monkeypatch, model):
    fake_cpu(monkeypatch, SAPPHIRE)
    engine = LocalEngine(model, config=EngineConfig(dtype="auto"))
    assert engine.dtype.name == "bfloat16" and engine.model is not model
    assert next(engine.model.parameters()).dtype == torch.bfloat16
    assert next(model.parameters()).dtype == torch.float32  # the trainer's model is untouched
    out = engine.generate([[1, 3, 40, 41]], SamplingParams(temperature=1.0, max_tokens=6, seed=0))
    assert len(out[0].token_ids) == 6 and all(lp <= 0 for lp in out[0].logprobs)
    state = {k: torch.zeros_like(v) for k, v in model.state_dict().items() if k.endswith("lm_head.weight")
             or k.endswith("embed_tokens.weight")}
    engine.update_weights(state, version=2)  # all-zero logits: every token equally likely
    out = engine.generate([[1, 3, 40, 41]], SamplingParams(temperature=1.0, max_tokens=3, seed=0))
    assert out[0].logprobs == pytest.approx([-torch.log(torch.tensor(model.config.vocab_size)).item()] * 3, abs=1e-2)


def test_packed_fp32_rows_do_not_depend_on_the_row_count(model):
    """Plain F.linear takes another GEMM path below 16 rows; the packed one gives every row the
    bits that F.linear gives in a large batch (the trainer's forward)."""
    lin = PackedLinear(model.model.layers[0].mlp.gate_proj)
    x = torch.randn(40, model.config.hidden_size, generator=torch.Generator().manual_seed(0))
    big = torch.nn.functional.linear(x, lin.weight)
    for rows in (1, 3, 15, 16, 40):
        assert torch.equal(lin(x[:rows]), big[:rows]), rows
    assert not all(torch.equal(torch.nn.functional.linear(x[:r], lin.weight), big[:r]) for r in (1, 3, 15))


def test_packed_weights_follow_in_place_updates(model):
    engine = LocalEngine(model, config=EngineConfig(batch_invariant=True))
    assert engine.packed
    params = SamplingParams(temperature=0, max_tokens=4)
    before = engine.generate([[1, 3, 40]], params)[0].logprobs
    head = model.lm_head.weight
    saved = head.detach().clone()
    try:
        with torch.no_grad():
            head.mul_(2.0)  # the trainer's optimizer writes in place, as this does
        engine.blocks.flush()
        after = engine.generate([[1, 3, 40]], params)[0].logprobs
        fresh = LocalEngine(model, config=EngineConfig(batch_invariant=True)).generate([[1, 3, 40]], params)[0]
        assert after != before and after == fresh.logprobs
    finally:
        with torch.no_grad():
            head.copy_(saved)


def test_batch_invariant_engine_agrees_with_the_trainer_alone_and_in_a_batch(model):
    from posttrain.train.logprobs import token_logprobs

    params = SamplingParams(temperature=0.8, max_tokens=10, seed=2)
    prompts = [[1, 3, 40 + i, 41, 42][: 2 + i] for i in range(6)]
    for batch in (prompts[:1], prompts):
        out = LocalEngine(model, config=EngineConfig(batch_invariant=True)).generate(batch, params)
        for p, c in zip(batch, out):
            ids = torch.tensor([p + c.token_ids])
            with torch.no_grad():
                want = token_logprobs(model, ids, torch.ones_like(ids), 0.8)[0, len(p):]
            assert (want - torch.tensor(c.logprobs)).abs().max().item() <= 1e-6


@pytest.mark.parametrize("out_features", [64, 128])
def test_packed_single_row_gets_the_bits_of_a_batch(out_features):
    """MKL's packed sgemm gives a 1-row call of some shapes (64 x 128 here) other bits than
    a batch; the probe at pack time routes such calls through two rows."""
    lin = PackedLinear(torch.nn.Linear(128, out_features, bias=False))
    x = torch.randn(24, 128, generator=torch.Generator().manual_seed(1))
    batch = lin(x)
    for r in range(24):
        assert torch.equal(lin(x[r : r + 1]), batch[r : r + 1]), r


@pytest.mark.parametrize("threads", [1, 2])
def test_packed_fp32_rows_get_a_batchs_bits_at_any_thread_count(threads):
    """MKL's AVX2 code (on AMD EPYC, AVX-512 or not) rounds a call's last 1-3 rows apart: below 4
    rows, and below 12 at 2 threads; calls padded to row_quantum's multiple get the batch's bits."""
    torch.set_num_threads(threads)  # the autouse fixture restores it
    assert packed.row_quantum() in packed.QUANTA
    lin = PackedLinear(torch.nn.Linear(576, 192))
    x = torch.randn(64, 576, generator=torch.Generator().manual_seed(2))
    big = torch.nn.functional.linear(x, lin.weight, lin.bias)
    for rows in range(1, 20):
        assert torch.equal(lin(x[:rows]), big[:rows]), rows


def test_an_exact_engine_says_so_where_no_padding_makes_rows_invariant(monkeypatch, model):
    monkeypatch.setattr(packed, "_quanta", {})
    monkeypatch.setattr(packed, "_probe_quantum", lambda: None)
    assert not packed.rows_invariant()
    with pytest.warns(UserWarning, match="not be bit-equal across batch sizes"):
        engine = LocalEngine(model, config=EngineConfig(batch_invariant=True))
    assert engine.exact_attention and not engine.batch_invariant
    monkeypatch.undo()
    assert LocalEngine(model, config=EngineConfig(batch_invariant=True)).batch_invariant


def test_onednn_fp32_kernel_is_close_to_f_linear_and_follows_updates(model):
    """The faster fp32 kernel (oneDNN's packed GEMM) rounds apart from F.linear, by fp32 ulps only."""
    src = model.model.layers[0].mlp.gate_proj
    lin = PackedLinear(src, gemm="onednn")
    x = torch.randn(9, model.config.hidden_size, generator=torch.Generator().manual_seed(0))
    for rows in (1, 9):
        torch.testing.assert_close(lin(x[:rows]), torch.nn.functional.linear(x[:rows], src.weight), rtol=1e-5, atol=1e-5)
    saved = src.weight.detach().clone()
    try:
        with torch.no_grad():
            src.weight.mul_(2.0)
        torch.testing.assert_close(lin(x), torch.nn.functional.linear(x, src.weight), rtol=1e-5, atol=1e-5)
    finally:
        with torch.no_grad():
            src.weight.copy_(saved)
    with pytest.raises(ValueError, match="gemm must be"):
        PackedLinear(src, gemm="blas")


def test_exact_engines_keep_mkl_and_others_take_the_faster_kernel(monkeypatch, model):
    monkeypatch.setattr(packed, "_fastest", {torch.get_num_threads(): "onednn"})
    assert LocalEngine(model, config=EngineConfig(batch_invariant=True)).fp32_kernel == "mkl"
    assert LocalEngine(model).fp32_kernel == "onednn"
    assert packed.fastest_fp32_kernel() in packed.GEMMS
