"""make_parts without pytest's fixture machinery, for module-scoped fixtures."""

import copy

import torch

from posttrain.engine.paged.local import LocalEngine
from posttrain.models.tiny import build_tiny_model
from posttrain.rollout.envs import SingleTurnEnv
from posttrain.rollout.single_turn import copy_prompts, similarity_reward
from posttrain.rollout.weights import LockedEngine

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
             intermediate_size=64, max_position_embeddings=128)


def parts(tokenizer, n=8, seed=0, group_size=4, max_tokens=6):
    torch.manual_seed(seed)
    model = build_tiny_model(len(tokenizer), seed=seed, **SMALL)
    end = tokenizer.convert_tokens_to_ids("<|end|>")
    env = SingleTurnEnv(copy_prompts(n, seed), tokenizer, similarity_reward, group_size=group_size,
                        max_tokens=max_tokens, max_context=128, stop_token_ids=[end])
    return env, model, LockedEngine(LocalEngine(copy.deepcopy(model), tokenizer))
