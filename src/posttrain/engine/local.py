"""LocalEngine: in-process generation on an HF causal LM that the trainer may share.

A static batch with the HF KV cache: prompts are left-padded, identical prompts (a GRPO group)
are prefilled once and their cache rows copied, then all rows decode together.
"""

from __future__ import annotations

import time

import torch

from posttrain.engine.base import Engine, SamplingParams
from posttrain.engine.sampling import make_generators, process_logits, row_params, sample_rows
from posttrain.types import Completion


def validate_prompts(prompts: list[list[int]], vocab_size: int, max_len: int | None, max_tokens: int):
    """Raise ValueError with a clear message for empty, out-of-vocab or too-long prompts."""
    if not prompts:
        raise ValueError("generate needs at least one prompt")
    for i, p in enumerate(prompts):
        if len(p) == 0:
            raise ValueError(f"prompt {i} is empty")
        if min(p) < 0 or max(p) >= vocab_size:
            raise ValueError(f"prompt {i} has token ids outside [0, {vocab_size})")
        if max_len is not None and len(p) + max_tokens > max_len:
            raise ValueError(
                f"prompt {i}: {len(p)} tokens + max_tokens {max_tokens} exceeds the context {max_len}"
            )


class LocalEngine(Engine):
    """Generate with a (shared) HF model; `update_weights` copies new weights in place."""

    def __init__(self, model, tokenizer=None, device: str = "cpu"):
        self.model = model
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.policy_version = 0

    def update_weights(self, state_dict: dict, version: int) -> None:
        with torch.no_grad():
            params = dict(self.model.named_parameters())
            for name, value in state_dict.items():
                if name in params:
                    params[name].copy_(value)
        self.policy_version = version

    @torch.inference_mode()
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        validate_prompts(prompts, self.model.config.vocab_size, None, params.max_tokens)
        t0 = time.perf_counter()
        was_training = self.model.training
        self.model.eval()
        try:
            out = self._generate(prompts, params)
        finally:
            self.model.train(was_training)
        wall = time.perf_counter() - t0
        for c in out:
            c.timings["generate_s"] = wall
        return out

    def _prefill(self, prompts: list[list[int]]):
        """Prefill each distinct prompt once; return (last logits [B, V], cache, mask [B, L])."""
        uniq = list(dict.fromkeys(tuple(p) for p in prompts))
        row_of = {p: i for i, p in enumerate(uniq)}
        width = max(len(p) for p in uniq)
        ids = torch.zeros(len(uniq), width, dtype=torch.long)
        mask = torch.zeros(len(uniq), width, dtype=torch.long)
        for i, p in enumerate(uniq):
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            position_ids=pos.to(self.device),
            use_cache=True,
        )
        index = torch.tensor([row_of[tuple(p)] for p in prompts], device=self.device)
        cache = out.cache
        if len(uniq) != len(prompts):
            cache.reorder_cache(index)
        return out.logits[:, -1].float().index_select(0, index), cache, mask.to(self.device)[index]

    def _generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        n = len(prompts)
        logits, cache, mask = self._prefill(prompts)
        temp, top_p, top_k = row_params([params] * n, self.device)
        greedy = temp <= 0
        gens = make_generators(params.seed, n)
        stops = torch.tensor(sorted(set(params.stop_token_ids)) or [-1], device=self.device)
        tokens = [[] for _ in range(n)]
        logps = [[] for _ in range(n)]
        done = torch.zeros(n, dtype=torch.bool, device=self.device)
        reason = ["length"] * n
        for step in range(params.max_tokens):
            ids, lp = sample_rows(process_logits(logits, temp, top_p, top_k), greedy, gens)
            for i in torch.nonzero(~done).flatten().tolist():
                tokens[i].append(int(ids[i]))
                logps[i].append(float(lp[i]))
            hit = torch.isin(ids, stops) & ~done
            for i in torch.nonzero(hit).flatten().tolist():
                reason[i] = "stop"
            done |= hit
            if bool(done.all()) or step + 1 == params.max_tokens:
                break
            mask = torch.cat([mask, (~done).long().unsqueeze(-1)], dim=1)
            pos = (mask.sum(-1, keepdim=True) - 1).clamp(min=0)
            out = self.model(
                input_ids=ids.unsqueeze(-1),
                attention_mask=mask,
                position_ids=pos,
                cache=cache,
                use_cache=True,
            )
            logits, cache = out.logits[:, -1].float(), out.cache
        return [
            Completion(tokens[i], logps[i], reason[i], policy_version=self.policy_version)
            for i in range(n)
        ]
