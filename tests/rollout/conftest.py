"""A real tiny policy and the single-turn copy environment, small enough for CPU tests."""

import copy

import pytest
import torch

from posttrain.engine.paged.local import LocalEngine
from posttrain.models.tiny import build_tiny_model, build_tokenizer
from posttrain.rollout.envs import SingleTurnEnv
from posttrain.rollout.single_turn import copy_prompts, similarity_reward
from posttrain.rollout.weights import LockedEngine

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
             intermediate_size=64, max_position_embeddings=128)


@pytest.fixture(scope="session")
def tokenizer():
    prompts = copy_prompts(40, 0)
    return build_tokenizer([p.text for p in prompts] + [p.target for p in prompts], vocab_size=300)


@pytest.fixture
def make_parts(tokenizer):
    """make_parts(reward_fn=..., n=8, **env_kw) -> (env, model, LockedEngine), all fresh."""
    def make(reward_fn=similarity_reward, n=8, seed=0, **kw):
        torch.manual_seed(seed)
        model = build_tiny_model(len(tokenizer), seed=seed, **SMALL)
        end = tokenizer.convert_tokens_to_ids("<|end|>")
        env = SingleTurnEnv(copy_prompts(n, seed), tokenizer, reward_fn, group_size=kw.pop("group_size", 4),
                            max_tokens=kw.pop("max_tokens", 6), max_context=128,
                            stop_token_ids=[end], **kw)
        return env, model, LockedEngine(LocalEngine(copy.deepcopy(model), tokenizer))
    return make
