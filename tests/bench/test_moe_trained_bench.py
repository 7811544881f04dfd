"""The trained-MoE arm of bench/train.py --section moe: the topic language is a proper sparse chain
per topic, training lowers the loss and stops at a plateau, the specialisation measures read
right on routings built by hand, and replay on the trained model's own samples pins every decision."""

import math
import random
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from parts import moe_replay, moe_training  # noqa: E402
from parts.topic_language import BOS, FIRST_WORD, TopicLanguage  # noqa: E402

from posttrain.models.tiny import build_tiny_model  # noqa: E402


def test_each_topic_is_a_sparse_markov_chain_over_its_own_words():
    lang = TopicLanguage.build(300, topics=3, words=20, branching=4, seed=1)
    assert lang.words == TopicLanguage.build(300, topics=3, words=20, branching=4, seed=1).words
    for own, chain in zip(lang.words, lang.successors):
        assert set(chain) == set(own) and min(own) >= FIRST_WORD
        for nexts in chain.values():
            assert len(nexts) == 4 and set(w for w, _ in nexts) <= set(own)
            assert math.isclose(sum(p for _, p in nexts), 1.0)
    topic, tokens = lang.sample(random.Random(0), 30)
    assert tokens[0] == BOS and len(tokens) == 30 and set(tokens[1:]) <= set(lang.words[topic])
    nll = lang.transition_nll(topic, tokens)
    assert len(nll) == 28 and all(x >= 0 for x in nll)


def test_plateau_means_less_than_the_gain_over_the_window():
    assert not moe_training.plateaued([5.0, 4.0, 3.0], evals=2, gain=0.01)
    assert moe_training.plateaued([5.0, 3.0, 2.99], evals=2, gain=0.01) is False  # 40% below 5.0
    assert moe_training.plateaued([3.0, 2.99, 2.98], evals=2, gain=0.01)
    assert not moe_training.plateaued([3.0], evals=2)


def test_usage_entropy_and_topic_information_on_hand_built_routings():
    even = torch.tensor([[0, 1], [2, 3]])
    assert math.isclose(moe_training.usage_entropy(even, 4), 1.0, rel_tol=1e-6)
    assert moe_training.usage_entropy(torch.tensor([[0, 1], [0, 1]]), 4) == 0.5
    topics = torch.tensor([0, 1])
    assert math.isclose(moe_training.topic_information(even, topics, 4), 1.0, rel_tol=1e-6)  # topic -> its pair
    same = torch.tensor([[0, 1], [0, 1]])
    assert abs(moe_training.topic_information(same, topics, 4)) < 1e-6


def test_training_lowers_the_held_out_loss_and_records_specialisation():
    torch.manual_seed(0)
    lang = TopicLanguage.build(200, topics=2, words=16, branching=2, seed=0)
    model = build_tiny_model(200, "tiny-moe", seed=0, num_hidden_layers=1)
    held_out = moe_training.sample_batch(lang, random.Random(1), 8, 24)[1]
    before = moe_training.transition_loss(model, held_out)
    record = moe_training.train_until_plateau(model, lang, seed=0, max_steps=20, eval_every=10)
    assert record["steps"] == 20 and record["stopped"] == "max_steps" and len(record["history"]) == 2
    assert moe_training.transition_loss(model, held_out) < before - 1.0
    topics, ids = moe_training.sample_batch(lang, random.Random(2), 8, 24)
    spec = moe_training.specialisation(model, topics, ids)
    assert len(spec["per_layer"]) == 1 and 0 < spec["mean_usage_entropy"] <= 1 and spec["mean_aux_loss"] > 0


def test_replay_on_the_language_prompts_pins_every_decision():
    lang = TopicLanguage.build(moe_replay.VOCAB, topics=2, words=16, seed=0)
    model = build_tiny_model(moe_replay.VOCAB, "tiny-moe", seed=0, num_hidden_layers=2)
    arm = moe_replay.replay_arm(model, "bf16", moe_replay.language_prompts(lang, 3), 6)
    routed_tokens = moe_replay.PROMPT_LEN + 6 - 1  # the last sampled token is never run through the model
    assert arm["on"]["router_mismatch"] == 0 and arm["decisions"] == 3 * routed_tokens * 2
    assert arm["off"]["router_mismatch"] == arm["off"]["router_mismatch_own"]
    rounded = arm["on_router_logits_bf16"]
    assert rounded["router_mismatch"] == 0 and rounded["logp_gap_mean"] != arm["on"]["logp_gap_mean"]


def test_the_bf16_router_diagnostic_rounds_only_inside_its_span():
    from posttrain.train import routing_replay

    x, w = torch.randn(4, 128), torch.randn(8, 128)
    with moe_replay.bf16_router_logits():
        rounded = routing_replay.F.linear(x, w)
    assert routing_replay.F is torch.nn.functional
    exact = torch.nn.functional.linear(x, w)
    assert rounded.dtype == torch.float32 and 0 < (rounded - exact).abs().max() < 0.05 * exact.abs().max()
