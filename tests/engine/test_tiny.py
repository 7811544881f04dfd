"""The embedded tokenizer and model: round-trips, chat template, determinism, save/load."""

import pytest
import torch

from posttrain.errors import PosttrainError
from posttrain.models.tiny import (
    SPECIAL_TOKENS,
    build_tiny_model,
    build_tokenizer,
    load_policy,
    save_policy,
)


def test_special_tokens_come_first_in_order(tokenizer):
    assert tokenizer.convert_ids_to_tokens(list(range(len(SPECIAL_TOKENS)))) == SPECIAL_TOKENS
    assert tokenizer.pad_token == "<|pad|>" and tokenizer.bos_token == "<|bos|>"
    assert tokenizer.eos_token == "<|end|>"


@pytest.mark.parametrize("text", ["plain ascii", "héllo 世界 🙂\n\t\r x", "<bash>ls</bash><submit/>", ""])
def test_decode_round_trips_utf8(tokenizer, text):
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text


def test_special_tokens_are_single_ids(tokenizer):
    ids = tokenizer.encode("<bash>echo</bash><|end|>", add_special_tokens=False)
    assert ids[0] == SPECIAL_TOKENS.index("<bash>")
    assert ids[-1] == SPECIAL_TOKENS.index("<|end|>")


def test_chat_template_renders_roles(tokenizer):
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U"},
        {"role": "assistant", "content": "A"},
        {"role": "tool", "content": "T"},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|bos|><|system|>S<|end|><|user|>U<|end|><|assistant|>A<|end|><|tool|>T<|end|><|assistant|>"
    )
    plain = tokenizer.apply_chat_template(messages[:2], tokenize=False)
    assert plain.endswith("U<|end|>")


def test_tokenizer_is_deterministic(tokenizer, corpus):
    again = build_tokenizer(corpus, vocab_size=400)
    assert again.get_vocab() == tokenizer.get_vocab()


def test_vocab_too_small_is_rejected(corpus):
    with pytest.raises(ValueError, match="vocab_size"):
        build_tokenizer(corpus, vocab_size=100)


def test_model_is_deterministic_for_a_seed(model, tokenizer):
    again = build_tiny_model(len(tokenizer), seed=0)
    other = build_tiny_model(len(tokenizer), seed=1)
    x = torch.tensor([[1, 3, 20, 30, 40]])
    with torch.no_grad():
        assert torch.equal(model(x).logits, again(x).logits)
        assert not torch.equal(model(x).logits, other(x).logits)
    assert model.dtype == torch.float32
    assert model.config.num_key_value_heads == 2 and model.config.tie_word_embeddings


def test_unknown_preset_is_a_clear_error(tokenizer):
    with pytest.raises(PosttrainError, match="preset"):
        build_tiny_model(len(tokenizer), preset="huge")


def test_save_load_round_trip_gives_identical_logits(model, tokenizer, tmp_path):
    save_policy(model, tokenizer, tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "model.safetensors").is_file()
    loaded, tok = load_policy(tmp_path / "ckpt")
    x = torch.tensor([tokenizer.encode("héllo <bash>ls</bash>")])
    with torch.no_grad():
        assert torch.equal(model(x).logits, loaded(x).logits)
    assert tok.decode(x[0].tolist()) == tokenizer.decode(x[0].tolist())
    assert tok.chat_template == tokenizer.chat_template


def test_load_missing_or_invalid_dir_is_one_line_error(tmp_path):
    with pytest.raises(PosttrainError, match="no config.json"):
        load_policy(tmp_path / "nope")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{not json")
    with pytest.raises(PosttrainError, match="cannot load model") as err:
        load_policy(tmp_path / "bad")
    assert "\n" not in str(err.value)
