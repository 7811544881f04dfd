"""RoPE scaling (models/rope.py) in the trainer: the packed forward (train/packed.py) runs linear
and YaRN models itself and gives HF's logprobs past original_max; a control shows the comparison
would catch dropped scaling."""

import pytest
import torch

from posttrain.models.rope import with_rope_scaling
from posttrain.models.tiny import build_tiny_model
from posttrain.train.batch import collate
from posttrain.train.logprobs import token_logprobs
from posttrain.train.packed import packed_logprobs, supports
from posttrain.types import Episode

ORIGINAL_MAX, FACTOR, VOCAB = 32, 4, 64
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
             intermediate_size=64, max_position_embeddings=ORIGINAL_MAX)
TOL = 1e-5


def _episodes() -> list[Episode]:
    g = torch.Generator().manual_seed(0)
    out = []
    for n_prompt, n_reply in ((60, 50), (60, 50), (20, 90), (5, 10)):   # up to position 110 of 128
        prompt = torch.randint(1, VOCAB, (n_prompt,), generator=g).tolist()
        reply = torch.randint(1, VOCAB, (n_reply,), generator=g).tolist()
        e = Episode("t", 0)
        e.append(prompt, sampled=False)
        e.prompt_len = n_prompt
        e.append(reply, sampled=True, logprobs=[0.0] * n_reply)
        out.append(e)
    return out


def _hf(model, episodes) -> torch.Tensor:
    b = collate(episodes, pad_id=0)
    with torch.no_grad():
        return token_logprobs(model, b.input_ids, b.attention_mask, 0.7) * b.loss_mask


def _scaled(kind: str):
    return with_rope_scaling(build_tiny_model(VOCAB, seed=0, **SMALL), kind, FACTOR, ORIGINAL_MAX)


@pytest.mark.parametrize("kind", ["linear", "yarn"])
def test_packed_forward_of_a_scaled_model_matches_hf(kind):
    model, episodes = _scaled(kind), _episodes()
    assert supports(model)
    with torch.no_grad():
        got = packed_logprobs(model, episodes, 0.7)
    want = _hf(model, episodes)
    assert (got - want).abs().max() < TOL


def test_the_comparison_catches_dropped_scaling():
    """Control: HF's forward of the same weights without scaling gives other logprobs."""
    episodes = _episodes()
    plain = build_tiny_model(VOCAB, seed=0, **(SMALL | {"max_position_embeddings": ORIGINAL_MAX * FACTOR}))
    with torch.no_grad():
        got = packed_logprobs(_scaled("yarn"), episodes, 0.7)
    assert (got - _hf(plain, episodes)).abs().max() > 10 * TOL
