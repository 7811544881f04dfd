"""Scoring a prompt: the logprob of each of its tokens given the ones before, and the top-k
alternatives at each position (what an OpenAI `echo` request and lm-eval's loglikelihood need).

One plain forward of the HF model (no KV cache, nothing cached or shared with generation),
with the vocabulary projection done in chunks so a long prompt never holds [L, V] logits.
"""

from __future__ import annotations

import torch

CHUNK = 256  # positions per lm_head call


def top_alternatives(logp: torch.Tensor, k: int) -> list[dict[int, float]]:
    """{token id: logprob} of the k most likely finite entries of each row of logp [R, V]."""
    vals, idx = logp.topk(min(k, logp.shape[-1]), dim=-1)
    out = []
    for v_row, i_row in zip(vals.tolist(), idx.tolist()):
        out.append({i: v for i, v in zip(i_row, v_row) if v != float("-inf")})
    return out


def prompt_logprobs(model, prompt: list[int], top_k: int, device) -> tuple[list, list]:
    """([None, lp_1, ..], [None, {id: lp}, ..]): raw (T = 1) log-softmax of the model's logits."""
    ids = torch.tensor([prompt], dtype=torch.long, device=device)
    hidden = model.model(input_ids=ids, use_cache=False).last_hidden_state[0]  # [L, H]
    lps: list[float | None] = [None]
    tops: list[dict[int, float] | None] = [None]
    for start in range(0, len(prompt) - 1, CHUNK):
        stop = min(start + CHUNK, len(prompt) - 1)
        logp = torch.log_softmax(model.lm_head(hidden[start:stop]).float(), dim=-1).cpu()
        targets = torch.tensor(prompt[start + 1 : stop + 1])
        lps += logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1).tolist()
        tops += top_alternatives(logp, top_k) if top_k else [{} for _ in range(stop - start)]
    return lps, tops
