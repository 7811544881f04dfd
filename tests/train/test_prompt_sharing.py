"""Forwards that run each shared prompt once (the HF-module one in train/prefix.py and the
lean packed one in train/packed.py): the same numbers and gradients as a full forward of
every sequence, for single-turn groups and multi-turn continuations, and a fallback when
they do not apply."""

import random

import pytest
import torch

from posttrain.models.tiny import build_tiny_model
from posttrain.train.batch import collate
from posttrain.train.logprobs import token_logprobs
from posttrain.train.packed import packed_logprobs
from posttrain.train.prefix import shared_prefix_logprobs
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig
from posttrain.types import Episode

VOCAB = 64


SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
             intermediate_size=64, max_position_embeddings=128)


def _model(**overrides):
    return build_tiny_model(VOCAB, seed=0, **(SMALL | overrides))


@pytest.fixture
def model():
    return _model()


def _groups(n_groups: int, group: int, multi_turn: bool, seed: int = 0) -> list[Episode]:
    rng = random.Random(seed)
    out = []
    for g in range(n_groups):
        prompt = [rng.randrange(1, VOCAB) for _ in range(rng.randint(3, 12))]
        for _ in range(group):
            e = Episode(f"task-{g}", g)
            e.append(prompt, sampled=False)
            e.prompt_len = len(prompt)
            reply = [rng.randrange(1, VOCAB) for _ in range(rng.randint(1, 8))]
            e.append(reply, sampled=True, logprobs=[0.0] * len(reply))
            if multi_turn and rng.random() < 0.6:  # an observation, then another reply
                e.append([rng.randrange(1, VOCAB) for _ in range(4)], sampled=False)
                e.append([5, 6], sampled=True, logprobs=[0.0, 0.0])
            e.reward = rng.random()
            out.append(e)
    return out


FORWARDS = {"hf-shared-prefix": lambda m, eps, t: shared_prefix_logprobs(m, eps, 0, t),
            "packed": lambda m, eps, t: packed_logprobs(m, eps, t),
            "packed-untrimmed": lambda m, eps, t: packed_logprobs(m, eps, t, trim=False)}


def _grads(model, loss) -> list[torch.Tensor]:
    model.zero_grad()
    loss.backward()
    return [p.grad.clone() for p in model.parameters()]


def _check_matches_full_forward(model, forward, episodes, temperature):
    b = collate(episodes, 0)
    full = token_logprobs(model, b.input_ids, b.attention_mask, temperature)
    shared = forward(model, episodes, temperature)
    assert shared.shape == full.shape
    assert ((full - shared) * b.loss_mask).abs().max() <= 1e-5
    for row, e in zip(shared, episodes):  # 0 on the prompt and on padding
        assert row[:e.prompt_len].abs().max() == 0 and row[len(e.tokens):].abs().sum() == 0
    g_full = _grads(model, (full * b.loss_mask).sum())
    g_shared = _grads(model, (forward(model, episodes, temperature) * b.loss_mask).sum())
    for a, s in zip(g_full, g_shared):
        assert torch.allclose(a, s, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("forward", FORWARDS)
@pytest.mark.parametrize("multi_turn", [False, True])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_matches_the_full_forward_in_values_and_gradients(model, forward, multi_turn, temperature):
    _check_matches_full_forward(model, FORWARDS[forward], _groups(3, 4, multi_turn), temperature)


def test_packed_covers_episodes_that_share_nothing_and_qwen2_biases():
    _check_matches_full_forward(_model(), FORWARDS["packed"], _groups(5, 1, True), 1.0)
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(1)
    qwen = Qwen2ForCausalLM(Qwen2Config(vocab_size=VOCAB, **SMALL)).eval()
    assert qwen.model.layers[0].self_attn.q_proj.bias is not None
    with torch.no_grad():  # HF initialises biases to 0; make them matter
        for layer in qwen.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(0, 0.5)
    _check_matches_full_forward(qwen, FORWARDS["packed"], _groups(3, 4, True), 1.0)


def test_packed_computes_logprobs_only_for_sampled_tokens(model):
    """Observations in multi-turn episodes get 0, not a logprob: the last layer and the
    logits run only where the model sampled; a batch with nothing sampled falls back."""
    episodes = _groups(3, 4, True)
    assert any(0 in e.loss_mask[e.prompt_len:] for e in episodes)
    lp = packed_logprobs(model, episodes)
    assert (lp * (1 - collate(episodes, 0).loss_mask)).abs().max() == 0
    for e in episodes:
        e.loss_mask = [0] * len(e.tokens)
    assert packed_logprobs(model, episodes) is None


def test_packed_declines_models_it_does_not_cover():
    episodes = _groups(2, 2, False)
    assert packed_logprobs(_model(mlp_bias=True), episodes) is None
    assert packed_logprobs(_model().to(torch.bfloat16), episodes) is None
    episodes[0].prompt_len = len(episodes[0].tokens)
    assert packed_logprobs(_model(), episodes) is None


def test_nothing_shared_or_nothing_after_the_prompt_falls_back(model):
    assert shared_prefix_logprobs(model, _groups(4, 1, False), 0) is None
    episodes = _groups(2, 2, False)
    episodes[0].prompt_len = len(episodes[0].tokens)
    assert shared_prefix_logprobs(model, episodes, 0) is None
    episodes = _groups(2, 2, False)
    episodes[1].prompt_len = 0
    assert shared_prefix_logprobs(model, episodes, 0) is None


def test_a_trainer_step_is_the_same_with_either_forward(model):
    import copy

    episodes = _groups(2, 4, True)
    results = []
    for packed, share in ((False, False), (False, True), (True, False)):
        m = copy.deepcopy(model)
        stats = PolicyTrainer(m, 0, OptimConfig(lr=1e-2)).rl_step(
            episodes, RLConfig(packed=packed, share_prefix=share))
        results.append((stats["loss"], [p.detach().clone() for p in m.parameters()]))
    for other in results[1:]:
        assert results[0][0] == pytest.approx(other[0], abs=1e-6)
        for a, b in zip(results[0][1], other[1]):
            assert torch.allclose(a, b, atol=1e-5)


def test_rl_steps_score_without_dropout_sft_steps_with_it():
    """A model with attention dropout: an RL step's logprobs are the eval-mode ones the
    engine sampled with (mismatch 0 at step 0 on every forward), while SFT trains with it."""
    m = _model(attention_dropout=0.5)
    episodes = _groups(2, 2, False)
    b = collate(episodes, 0)
    with torch.no_grad():
        sampler = token_logprobs(m.eval(), b.input_ids, b.attention_mask)
    for e, row in zip(episodes, sampler):
        e.logprobs = [float(x) * k for x, k in zip(row, e.loss_mask)]
    trainer = PolicyTrainer(m, 0, OptimConfig(lr=1e-9))
    m.train()
    stats = trainer.rl_step(episodes, RLConfig(packed=False, share_prefix=False))
    assert stats["mismatch_max_abs"] <= 1e-5 and not m.training
    modes = []
    hook = m.model.layers[0].register_forward_pre_hook(lambda mod, args: modes.append(mod.training))
    trainer.sft_step(episodes)
    hook.remove()
    assert modes == [True] and not m.training
