"""models/rope.py: the transform writes HF's rope parameters, rebuilds the rotary module from
them (PI divides every frequency by the factor; YaRN keeps the fastest, divides the slowest,
scales cos/sin), round-trips through save/load, and "none" puts the plain rope back."""

import pytest
import torch

from posttrain.models.rope import rope_kind, with_rope_scaling
from posttrain.models.tiny import build_tiny_model

SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=512)


def _model():
    return build_tiny_model(300, seed=0, **SMALL)


def test_linear_divides_every_frequency_by_the_factor():
    plain = _model().model.rotary_emb.inv_freq.clone()
    model = with_rope_scaling(_model(), "linear", 4, 512)
    assert torch.allclose(model.model.rotary_emb.inv_freq, plain / 4)
    assert model.config.max_position_embeddings == 2048 and rope_kind(model.config) == "linear"


def test_yarn_keeps_fast_frequencies_divides_slow_ones_and_scales_cos_sin():
    plain = _model().model.rotary_emb.inv_freq.clone()
    rotary = with_rope_scaling(_model(), "yarn", 4, 512).model.rotary_emb
    assert torch.allclose(rotary.inv_freq[0], plain[0]) and torch.allclose(rotary.inv_freq[-1], plain[-1] / 4)
    assert rotary.attention_scaling == pytest.approx(0.1 * torch.log(torch.tensor(4.0)).item() + 1)


def test_it_round_trips_through_a_checkpoint_and_none_undoes_it(tmp_path):
    model = with_rope_scaling(_model(), "yarn", 4, 512)
    from transformers import AutoModelForCausalLM

    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert torch.equal(loaded.model.rotary_emb.inv_freq, model.model.rotary_emb.inv_freq)
    assert loaded.config.rope_parameters["original_max_position_embeddings"] == 512
    back = with_rope_scaling(loaded, "none", original_max=512)
    assert torch.equal(back.model.rotary_emb.inv_freq, _model().model.rotary_emb.inv_freq)
    assert rope_kind(back.config) == "none" and back.config.max_position_embeddings == 512


def test_a_config_alone_is_set_and_bad_arguments_are_refused():
    config = with_rope_scaling(_model().config, "linear", 2, 512)
    assert config.rope_parameters["factor"] == 2.0
    with pytest.raises(ValueError, match="unknown rope scaling"):
        with_rope_scaling(_model(), "dynamic", 2, 512)
    with pytest.raises(ValueError, match="factor >= 1"):
        with_rope_scaling(_model(), "yarn", 0.5, 512)
