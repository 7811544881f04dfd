"""The embedded default model: a byte-level BPE tokenizer and a tiny Llama (or a tiny Qwen3-MoE,
preset "tiny-moe"), built in-process.

Nothing is downloaded: the tokenizer is trained on a corpus the caller gives, the model is
initialised from a seed, and both are saved/loaded through the ordinary HF code paths, so a
real Llama/Qwen2 checkpoint directory loads exactly the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from posttrain.errors import PosttrainError

SPECIAL_TOKENS = [
    "<|pad|>",
    "<|bos|>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|tool|>",
    "<|end|>",
    "<bash>",
    "</bash>",
    "<submit/>",
]

# The agent's action tokens: text a served reply keeps by default (see serve/text.py).
ACTION_TOKENS = tuple(SPECIAL_TOKENS[7:])

CHAT_ROLES = ("system", "user", "assistant", "tool")

# `<|role|>content<|end|>` per message, one <|bos|> first, `<|assistant|>` to prompt a reply.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant', 'tool'] %}"
    "{{ raise_exception('unknown chat role: ' + message['role']) }}"
    "{% endif %}"
    "<|{{ message['role'] }}|>{{ message['content'] }}<|end|>"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

# name -> config fields; "tiny" trains in seconds on a CPU, "small" is ~4x the compute; "tiny-moe"
# is a Qwen3-MoE (its fields name experts: MOE_FIELDS) of tiny's attention, 8 experts, top 2.
PRESETS: dict[str, dict] = {
    "tiny": dict(
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=384,
    ),
    "small": dict(
        hidden_size=256,
        num_hidden_layers=6,
        num_attention_heads=8,
        num_key_value_heads=4,
        intermediate_size=768,
    ),
    "tiny-moe": dict(
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        intermediate_size=384,
        num_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=96,
        norm_topk_prob=True,
    ),
}
MOE_FIELDS = "num_experts"  # a preset with it builds a Qwen3MoeForCausalLM


def build_tokenizer(corpus: Iterable[str], vocab_size: int = 1024):
    """Train a byte-level BPE on `corpus`; deterministic for the same corpus and size."""
    from transformers import PreTrainedTokenizerFast

    min_size = 256 + len(SPECIAL_TOKENS)
    if vocab_size < min_size:
        raise ValueError(f"vocab_size must be >= {min_size} (256 bytes + special tokens)")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<|pad|>",
        bos_token="<|bos|>",
        eos_token="<|end|>",
    )
    fast.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS[2:6] + SPECIAL_TOKENS[7:]})
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _classes(fields: dict):
    """(config class, model class) of a preset's fields: Qwen3-MoE where they name experts."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

    return (Qwen3MoeConfig, Qwen3MoeForCausalLM) if MOE_FIELDS in fields else (LlamaConfig, LlamaForCausalLM)


def build_tiny_model(vocab_size: int, preset: str = "tiny", seed: int = 0, **overrides):
    """A float32 LlamaForCausalLM (Qwen3MoeForCausalLM for "tiny-moe") from PRESETS[preset],
    initialised deterministically from seed."""
    if preset not in PRESETS:
        raise PosttrainError(f"unknown model preset {preset!r}; choose from {sorted(PRESETS)}")
    fields = dict(
        PRESETS[preset],
        vocab_size=vocab_size,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=6,
        rms_norm_eps=1e-6,
    )
    fields.update(overrides)
    config_class, model_class = _classes(fields)
    config = config_class(**fields)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_class(config)
    return model.to(torch.float32).eval()


def save_policy(model, tokenizer, directory: str | Path, state_dict: dict | None = None) -> Path:
    """Write an HF checkpoint directory (config.json, model.safetensors, tokenizer files);
    state_dict: the weights to write in place of the model's own (e.g. LoRA merged)."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, state_dict=state_dict)
    if tokenizer is not None:
        tokenizer.save_pretrained(path)
    return path


def load_policy(directory: str | Path, dtype: torch.dtype = torch.float32):
    """Load (model, tokenizer) from an HF checkpoint directory (Llama/Qwen2 family)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(directory).expanduser()
    if not (path / "config.json").is_file():
        raise PosttrainError(f"not a model directory (no config.json): {path}")
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PosttrainError(f"cannot load model from {path}: {first}") from e
    return model.eval(), tokenizer
