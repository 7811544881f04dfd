"""Sliding-window layers (models/windows.py) in the engine: its logprobs match HF's forward, which
masks by the same rule, past the window and over several KV blocks, in prefill (chunked and from
the prefix cache) and decode; a model mixing full and windowed layers plans each its own way."""

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.local import LocalEngine
from posttrain.models.windows import layer_windows
from posttrain.train.logprobs import token_logprobs

COMMON = dict(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=True)
WINDOW = 8


def _mistral():
    from transformers import MistralConfig, MistralForCausalLM

    return MistralForCausalLM(MistralConfig(**COMMON, sliding_window=WINDOW))


def _qwen2_mixed():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    return Qwen2ForCausalLM(Qwen2Config(**COMMON, use_sliding_window=True, sliding_window=WINDOW, max_window_layers=1))


def test_which_layers_have_a_window():
    assert layer_windows(_mistral().config) == [WINDOW] * 3
    assert layer_windows(_qwen2_mixed().config) == [None, WINDOW, WINDOW]
    from transformers import LlamaConfig

    assert layer_windows(LlamaConfig(**COMMON)) == [None] * 3


@pytest.mark.parametrize("build", [_mistral, _qwen2_mixed], ids=["mistral", "qwen2-mixed"])
def test_windowed_engine_logprobs_match_hf_forward(build):
    torch.manual_seed(0)
    model = build().eval()
    shared = list(range(10, 50))                         # 40 tokens: 5 windows, 3 blocks of 16
    prompts = [shared, shared, shared[:20] + [7, 8, 9]]
    engine = LocalEngine(model, config=EngineConfig(block_size=16, max_num_batched_tokens=24))  # chunked prefill
    params = SamplingParams(temperature=0.9, max_tokens=30, seed=5)
    first = engine.generate(prompts, params)
    again = engine.generate([shared + [3, 4, 5]], params)          # its prefix from the cache
    assert engine.runner.attention_backend[0] == "torch"
    for p, c in zip(prompts + [shared + [3, 4, 5]], first + again):
        ids = torch.tensor([p + c.token_ids])
        with torch.no_grad():
            want = token_logprobs(model, ids, torch.ones_like(ids), 0.9)[0, len(p):]
        assert (want - torch.tensor(c.logprobs)).abs().max() < 1e-4


def test_the_engine_masks_by_the_window_not_the_whole_context():
    """Against a control: the same weights with the window off give other logprobs, so the test
    above would catch an engine that ignored the window."""
    torch.manual_seed(0)
    windowed = _mistral().eval()
    full = _mistral().eval()
    full.config.sliding_window = None
    full.load_state_dict(windowed.state_dict())
    prompt = list(range(10, 50))
    params = SamplingParams(temperature=0.0, max_tokens=4)
    a = LocalEngine(windowed, config=EngineConfig()).generate([prompt], params)[0]
    b = LocalEngine(full, config=EngineConfig()).generate([prompt], params)[0]
    assert a.logprobs != b.logprobs


def test_vllm_kernels_asked_for_a_windowed_model_is_an_error():
    with pytest.raises(ValueError, match="sliding-window layers run in torch"):
        LocalEngine(_mistral().eval(), config=EngineConfig(kernels="vllm"))
