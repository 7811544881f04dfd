"""The engine on the decode GEMVs (kernels/gemv.py): the default engine decodes on them, a
batch-invariant one never, and one on a CPU without AVX-512 decodes on its GEMMs."""

import pytest

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.local import LocalEngine
from posttrain.kernels import gemv


@pytest.fixture
def no_avx512(monkeypatch):
    flags = frozenset(f for f in gemv.cpu_flags() if not f.startswith("avx512"))
    monkeypatch.setattr(gemv, "cpu_flags", lambda: flags)


def runs_gemv(kind: str) -> bool:
    return not gemv.missing_flags(kind) and gemv.module() is not None


def test_an_engine_without_the_isa_decodes_on_its_gemms(no_avx512, model):
    engine = LocalEngine(model, config=EngineConfig(dtype="bfloat16", weights="int8"))
    out = engine.generate([[1, 3, 40, 41]], SamplingParams(temperature=0, max_tokens=4))
    assert len(out[0].token_ids) == 4
    assert all(lin.gemv is None for layer in engine.runner.linears for lin in layer.values())


def test_the_default_engine_decodes_on_the_gemv_and_a_batch_invariant_one_never(model):
    default = LocalEngine(model, config=EngineConfig(dtype="float32"))
    exact = LocalEngine(model, config=EngineConfig(dtype="float32", batch_invariant=True))
    prompt = [[1, 3, 40, 41, 7]]
    greedy = SamplingParams(temperature=0, max_tokens=6)
    a, b = default.generate(prompt, greedy)[0], exact.generate(prompt, greedy)[0]
    head, exact_head = default.runner.linears[-1]["head"], exact.runner.linears[-1]["head"]
    assert (head.gemv is not None) == runs_gemv("fp32") and exact_head.gemv is None and not exact.gemv
    assert max(abs(p - q) for p, q in zip(a.logprobs, b.logprobs)) < 1e-3  # same tokens, logprobs within fp32 noise
    assert a.token_ids == b.token_ids
