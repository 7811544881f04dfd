"""The runner's own layer loop (fused projections, fused norms, rotary) against HF's forward on
each supported family's quirks: Qwen2's q/k/v biases, Qwen3's per-head q/k norms."""

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.local import LocalEngine
from posttrain.train.logprobs import token_logprobs

COMMON = dict(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=True)


def _qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    return Qwen2ForCausalLM(Qwen2Config(**COMMON))


def _qwen3():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    return Qwen3ForCausalLM(Qwen3Config(**COMMON, head_dim=16))


@pytest.mark.parametrize("build", [_qwen2, _qwen3], ids=["qwen2-biases", "qwen3-qk-norm"])
def test_engine_logprobs_match_hf_forward(build):
    torch.manual_seed(0)
    model = build().eval()
    with torch.no_grad():  # visible biases and norm weights, so a dropped one shows
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(torch.randn_like(p) * 0.5)
    prompts = [[5, 9, 30, 31, 2, 7, 8], [5, 9, 30, 31, 2, 7, 8], [11, 12]]
    out = LocalEngine(model, config=EngineConfig()).generate(prompts, SamplingParams(temperature=0.8, max_tokens=12, seed=3))
    for p, c in zip(prompts, out):
        ids = torch.tensor([p + c.token_ids])
        with torch.no_grad():
            want = token_logprobs(model, ids, torch.ones_like(ids), 0.8)[0, len(p):]
        assert (want - torch.tensor(c.logprobs)).abs().max() < 1e-5
