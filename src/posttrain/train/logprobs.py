"""Per-token logprobs and entropies of a causal LM over given token ids (with grad).

These are the trainer's numbers; the engine's sampled logprobs are tested to agree with them
for the same tokens (tests/engine/paged/test_logprobs.py).
"""

from __future__ import annotations

import torch

from posttrain.kernels.exact_attention import exact_attention_on
from posttrain.kernels.exact_linear import exact_linears_on
from posttrain.train.chunked import head_logprobs


def check_temperature(temperature: float) -> None:
    if temperature <= 0:
        raise ValueError("temperature must be > 0 for logprobs")


def continuation_logprobs(logits: torch.Tensor, targets: torch.Tensor, valid: torch.Tensor,
                          positions: torch.Tensor, width: int, temperature: float) -> torch.Tensor:
    """Each episode's continuation logprobs placed at their positions in the episode.

    logits [N, L, V] predict targets [N, L] (valid [N, L] where a token exists), which sit at
    positions [N, L] of their episodes; returns [N, width], 0 elsewhere."""
    logits = logits.float()  # bf16 under autocast (train/precision.py); fp32 already: the same tensor
    if temperature != 1.0:
        logits = logits / temperature
    lp = logits.gather(-1, targets[..., None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    return placed(lp * valid.to(lp.dtype), positions, width)


def placed(lp: torch.Tensor, positions: torch.Tensor, width: int) -> torch.Tensor:
    """Continuation logprobs lp [N, L] moved to their positions [N, L] in the episodes, [N, width]."""
    full = torch.zeros(len(lp), int(positions.max()) + 1, device=lp.device).scatter(1, positions, lp)
    return full[:, :width]


def output_weight(model) -> torch.Tensor:
    """The lm_head weight [V, H] (embed_tokens' own where they are tied)."""
    return model.get_output_embeddings().weight


def _shifted_logits(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float):
    """Logits predicting token t from tokens < t, [B, T-1, V], scaled by 1/temperature."""
    check_temperature(temperature)
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    # No KV cache: the trainer never decodes, and layers that write one cannot be checkpointed
    # (train/act_checkpoint.py).
    out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                use_cache=False)
    logits = out.logits[:, :-1].float()
    return logits / temperature if temperature != 1.0 else logits


def token_logprobs(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0, head=None
) -> torch.Tensor:
    """out[b, t] = log p(input_ids[b, t] | input_ids[b, :t]) under softmax(logits / temperature).

    input_ids, attention_mask: [B, T] (right-padded); returns [B, T] float32 with out[:, 0] = 0
    and 0 at padded positions. head (train/chunked.py): logprobs from the final hidden states,
    no [B, T, V] logits.
    """
    if head is not None:
        return _head_token_logprobs(model, input_ids, attention_mask, temperature, head)
    logits = _shifted_logits(model, input_ids, attention_mask, temperature)  # [B, T-1, V]
    targets = input_ids[:, 1:].unsqueeze(-1)  # [B, T-1, 1]
    picked = logits.gather(-1, targets).squeeze(-1)
    lp = picked - torch.logsumexp(logits, dim=-1)  # [B, T-1]
    lp = lp * attention_mask[:, 1:].to(lp.dtype)
    return torch.cat([torch.zeros_like(lp[:, :1]), lp], dim=1)


def _head_token_logprobs(model, input_ids, attention_mask, temperature: float, head) -> torch.Tensor:
    check_temperature(temperature)
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    hidden = model.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         use_cache=False).last_hidden_state[:, :-1]
    lp = head_logprobs(head, hidden, output_weight(model), input_ids[:, 1:], attention_mask[:, 1:],
                       temperature)
    return torch.cat([torch.zeros_like(lp[:, :1]), lp], dim=1)


def exact_token_logprobs(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """token_logprobs with exact attention (kernels/exact_attention.py) and the engine's packed
    linears (kernels/exact_linear.py): a batch_invariant fp32 engine's bits. Same shapes."""
    with exact_attention_on(model), exact_linears_on(model):
        return token_logprobs(model, input_ids, attention_mask, temperature)


def token_entropy(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """out[b, t] = entropy of the next-token distribution that predicted input_ids[b, t]; [B, T]."""
    logits = _shifted_logits(model, input_ids, attention_mask, temperature)
    logp = torch.log_softmax(logits, dim=-1)
    ent = -(logp.exp() * logp).sum(-1) * attention_mask[:, 1:].to(logp.dtype)
    return torch.cat([torch.zeros_like(ent[:, :1]), ent], dim=1)
