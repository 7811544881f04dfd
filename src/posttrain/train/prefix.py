"""Per-token logprobs of episodes that share prompts, each shared prompt computed once.

A GRPO group is G episodes of one prompt. Each distinct prompt runs through the model
once (with grad); its keys and values are indexed out to every episode that continues
it, and the continuations (replies, observations, later turns) run on top. The numbers
are those of a full forward over every sequence, to float rounding, while the prompts'
share of the compute is divided by G; gradients reach the prompt positions through the
shared keys and values.
"""

from __future__ import annotations

import inspect

import torch

from posttrain.train.batch import right_pad
from posttrain.train.chunked import head_logprobs
from posttrain.train.logprobs import check_temperature, continuation_logprobs, output_weight, placed
from posttrain.types import Episode


def distinct_prompts(episodes: list[Episode]) -> tuple[list[list[int]], list[int]]:
    """(the distinct prompts, the index of each episode's prompt among them)."""
    seen: dict[tuple, int] = {}
    index = []
    for e in episodes:
        index.append(seen.setdefault(tuple(e.tokens[:e.prompt_len]), len(seen)))
    return [list(p) for p in seen], index


def _cache_kwarg(model) -> str:
    """transformers 5 renamed `past_key_values` to `cache` (in forward and in its outputs)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def shared_prefix_logprobs(model, episodes: list[Episode], pad_id: int,
                           temperature: float = 1.0, head=None) -> torch.Tensor | None:
    """[N, T] as `token_logprobs` over `collate(episodes)` gives on the tokens after each
    prompt (0 on the prompt and on padding), or None when no two episodes share a prompt
    or an episode has no prompt or nothing after it. head (train/chunked.py): the logprobs
    from the final hidden states, no logits."""
    if any(not 0 < e.prompt_len < len(e.tokens) for e in episodes):
        return None
    prompts, index = distinct_prompts(episodes)
    if len(prompts) == len(episodes):
        return None
    check_temperature(temperature)
    device = output_weight(model).device  # the index tensors follow the model
    idx = torch.tensor(index, device=device)
    prompt_ids = right_pad(prompts, pad_id)[0].to(device)
    # With a head, the decoder's final hidden states stand where the logits were.
    forward, out = (model, "logits") if head is None else (model.model, "last_hidden_state")
    first_out = forward(input_ids=prompt_ids, use_cache=True)  # right-padded: the causal mask suffices
    kwarg = _cache_kwarg(model)
    cache = getattr(first_out, kwarg)
    cache.reorder_cache(idx)  # one copy of its prompt's keys and values per episode
    p_len = torch.tensor([len(p) for p in prompts], device=device)[idx]
    tail_ids, tail_mask = (t.to(device) for t in right_pad([e.tokens[e.prompt_len:] for e in episodes], pad_id))
    width = tail_ids.shape[1]
    seen = torch.arange(prompt_ids.shape[1], device=device)[None, :] < p_len[:, None]  # real prompt positions
    positions = p_len[:, None] + torch.arange(width, device=device)[None, :]
    tail = forward(input_ids=tail_ids, attention_mask=torch.cat([seen.long(), tail_mask], dim=1),
                   position_ids=positions, **{kwarg: cache})
    first = getattr(first_out, out)[idx, p_len - 1]  # predicts each episode's first token after its prompt
    states = torch.cat([first[:, None], getattr(tail, out)[:, :-1]], dim=1)
    n_cols = max(len(e.tokens) for e in episodes)
    if head is not None:
        lp = head_logprobs(head, states, output_weight(model), tail_ids, tail_mask, temperature)
        return placed(lp, positions, n_cols)
    return continuation_logprobs(states.float(), tail_ids, tail_mask, positions, n_cols, temperature)
