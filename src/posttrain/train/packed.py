"""A lean training forward for Llama-family decoders: prompts and continuations packed.

On CPU the trainer's RL forward of a small model is bound by per-op overhead and by rows
that do no work (padding), not by attention. This forward uses the model's own parameters
(autograd trains them) and:
- computes every distinct prompt once (a GRPO group's G episodes share it);
- packs the real tokens of all prompts and continuations as rows of one matrix with no
  padding, so each projection, norm and MLP is one kernel per layer, and q/k/v and gate/up
  are single matmuls over concatenated weights;
- lays rows out per sequence only for attention, by index (prompts attend causally to
  themselves; each continuation to its prompt and to itself);
- runs the last layer's queries, output projection and MLP only on the rows whose outputs
  become logits (its keys and values still come from every row), and computes logits only
  there.

The numbers are those of the HF forward to float rounding (tests/train/test_prompt_sharing.py).
With exact=True attention runs in float64, rounded once (kernels/exact_attention.py), and the
linears through the engine's packed kernel (kernels/exact_linear.py): then a batch_invariant fp32
engine's logprobs equal these bit for bit (tests/train/test_exact_logprobs.py).
Models it does not cover (rope types whose table changes with the length, MLP biases, sliding windows, q/k norms,
non-float32 weights) return None and the caller runs the HF forward.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F

from posttrain.kernels.exact_attention import exact_sdpa
from posttrain.kernels.exact_linear import exact_linear
from posttrain.kernels.layers import rms_norm, rotary, signed_sines
from posttrain.models.rope import STATIC_ROPE
from posttrain.train.act_checkpoint import run_layer
from posttrain.train.batch import right_pad
from posttrain.train.chunked import head_logprobs
from posttrain.train.logprobs import check_temperature, continuation_logprobs, placed
from posttrain.train.lora import adapter_output, base_linear, has_lora
from posttrain.train.prefix import distinct_prompts
from posttrain.types import Episode


def supports(model) -> bool:
    cfg = model.config
    rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    return (cfg.model_type in ("llama", "qwen2")
            and rope.get("rope_type", "default") in STATIC_ROPE
            and getattr(cfg, "hidden_act", "silu") == "silu"
            and not getattr(cfg, "mlp_bias", False)
            and not getattr(cfg, "use_sliding_window", False)
            and next(model.parameters()).dtype == torch.float32
            and _plain_linears(model.model.layers[0]))


def _plain_linears(layer) -> bool:
    """Its projections are nn.Linear (read here by weight), each maybe wrapped in a LoRA adapter."""
    attn, mlp = layer.self_attn, layer.mlp
    return all(type(base_linear(m)) is torch.nn.Linear
               for m in (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, mlp.gate_proj, mlp.up_proj,
                         mlp.down_proj))


@dataclass(frozen=True)
class Arch:
    """What every layer's forward needs to know of the model, and the attention numerics."""

    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    exact: bool  # float64 attention rounded once, and the engine's packed linears (bit-identical logprobs)

    def sdpa(self, q, k, v, **kwargs) -> torch.Tensor:
        attend = exact_sdpa if self.exact else F.scaled_dot_product_attention
        return attend(q, k, v, enable_gqa=self.heads != self.kv_heads, **kwargs)

    def linear(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        """F.linear; exact: the engine's packed kernel (kernels/exact_linear.py), whose bits do not
        depend on the row or thread count (F.linear's do), on concatenated weights as well."""
        return exact_linear(x, w, b) if self.exact else F.linear(x, w, b)

    def project(self, x: torch.Tensor, *projs) -> torch.Tensor:
        """x through the projections side by side: one matmul over their concatenated weights
        (and biases), plus each one's LoRA term s B A x where it has adapters (train/lora.py)."""
        bases = [base_linear(p) for p in projs]
        w = bases[0].weight if len(bases) == 1 else torch.cat([b.weight for b in bases])
        b = None if bases[0].bias is None else torch.cat([b.bias for b in bases])
        y = self.linear(x, w, b)
        terms = [adapter_output(p, x) for p in projs]
        if all(t is None for t in terms):
            return y
        return y + torch.cat([x.new_zeros(len(x), base.out_features) if t is None else t
                              for t, base in zip(terms, bases)], dim=-1)


@dataclass
class Layout:
    """Where each token lives. Rows: the real tokens of every distinct prompt, then of every
    continuation. Padded slots read row 0: attention masks them out or their outputs are
    dropped, so they reach no result and no gradient."""

    ids: torch.Tensor          # [R] token ids
    positions: torch.Tensor    # [R]
    prompt_rows: torch.Tensor  # [P, Lp] row of each prompt slot (0 where padded)
    key_rows: torch.Tensor     # [N, Lp + Lt] episode e's keys: its prompt's rows, then its own
    key_mask: torch.Tensor     # [N, 1, Lt, Lp + Lt] what each continuation query may see
    back: torch.Tensor         # [R] row of each packed token in cat(prompt outputs, tail outputs)
    logit_rows: torch.Tensor   # [N, Lt] row whose output predicts continuation token t
    logit_mask: torch.Tensor   # [N, 1, Lt, Lp + Lt] what the query at logit_rows[:, t] may see
    out_rows: torch.Tensor     # [M] the distinct rows of logit_rows where valid
    out_slot: torch.Tensor     # [M] a slot of logit_rows (flattened) holding each of out_rows
    slot_out: torch.Tensor     # [N, Lt] index into out_rows of each slot (0 where padded)
    targets: torch.Tensor      # [N, Lt] continuation ids (0 where padded)
    valid: torch.Tensor        # [N, Lt] 1 where the model sampled continuation token t
    tail_pos: torch.Tensor     # [N, Lt] each continuation token's position in its episode

    def to(self, device: torch.device) -> Layout:
        """The index tensors on the model's device (built on the CPU from Python lists)."""
        if self.ids.device == device:
            return self
        return Layout(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})


def _padded_rows(lengths: list[int], start: int) -> tuple[torch.Tensor, torch.Tensor]:
    """([S, L] the row of each slot, 0 where padded; [S, L] bool, True where real)."""
    real = torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]
    rows = torch.zeros(real.shape, dtype=torch.long)
    rows[real] = torch.arange(start, start + sum(lengths))
    return rows, real


def _output_rows(logit_rows: torch.Tensor, valid: torch.Tensor):
    """(out_rows, out_slot, slot_out) of Layout: the distinct rows of the valid slots, a slot
    holding each, and for every slot its row's index (0 for slots that are not valid)."""
    filled = valid.reshape(-1).nonzero().squeeze(1)
    out_rows, which = logit_rows.reshape(-1)[filled].unique(return_inverse=True)
    out_slot = torch.zeros_like(out_rows).scatter_reduce(0, which, filled, "amin", include_self=False)
    slot_out = torch.zeros(valid.numel(), dtype=torch.long).index_put_((filled,), which)
    return out_rows, out_slot, slot_out.view(valid.shape)


def layout(episodes: list[Episode]) -> Layout:
    prompts, which = distinct_prompts(episodes)
    tails = [e.tokens[e.prompt_len:] for e in episodes]
    p_lens, t_lens = [len(p) for p in prompts], [len(t) for t in tails]
    n_prompt_rows = sum(p_lens)
    prompt_rows, prompt_real = _padded_rows(p_lens, 0)
    tail_rows, tail_real = _padded_rows(t_lens, n_prompt_rows)
    idx = torch.tensor(which)
    lt = tail_rows.shape[1]
    p_len = torch.tensor(p_lens)[idx]
    seen = torch.arange(prompt_rows.shape[1])[None, :] < p_len[:, None]
    causal = torch.ones(lt, lt, dtype=torch.bool).tril()
    key_mask = torch.cat([seen[:, None, :].expand(-1, lt, -1), causal.expand(len(episodes), -1, -1)], dim=2)
    # Outputs come back as [P*Lp prompt slots, N*Lt tail slots]; pick each real row's slot.
    slots = torch.arange(prompt_rows.numel() + tail_rows.numel())
    back = slots[torch.cat([prompt_real.reshape(-1), tail_real.reshape(-1)])]
    last_prompt_row = prompt_rows[torch.arange(len(prompts)), torch.tensor(p_lens) - 1][idx]
    logit_rows = torch.cat([last_prompt_row[:, None], tail_rows[:, :-1]], dim=1)
    targets, _ = right_pad(tails, 0)
    valid, _ = right_pad([e.loss_mask[e.prompt_len:] for e in episodes], 0)
    # Slot t's query is the token before continuation token t: it sees the prompt and the
    # continuation tokens before t.
    before = torch.ones(lt, lt, dtype=torch.bool).tril(-1)
    logit_mask = torch.cat([seen[:, None, :].expand(-1, lt, -1), before.expand(len(episodes), -1, -1)], dim=2)
    out_rows, out_slot, slot_out = _output_rows(logit_rows, valid)
    return Layout(
        ids=torch.tensor([t for p in prompts for t in p] + [t for s in tails for t in s]),
        positions=torch.cat([torch.arange(n) for n in p_lens] + [torch.arange(p_lens[w], p_lens[w] + n)
                                                                 for w, n in zip(which, t_lens)]),
        prompt_rows=prompt_rows, key_rows=torch.cat([prompt_rows[idx], tail_rows], dim=1),
        key_mask=key_mask[:, None], back=back,
        logit_rows=logit_rows, logit_mask=logit_mask[:, None], out_rows=out_rows, out_slot=out_slot,
        slot_out=slot_out, targets=targets, valid=valid, tail_pos=p_len[:, None] + torch.arange(lt)[None, :])


def _per_sequence(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Packed [R, h, D] -> [S, h, L, D] by a row index [S, L]."""
    return x[rows].transpose(1, 2)


def _packed(o: torch.Tensor) -> torch.Tensor:
    """[S, h, L, D] -> [S*L, h*D]."""
    return o.transpose(1, 2).reshape(-1, o.shape[1] * o.shape[3])


def _attend(q, k, v, lay: Layout, arch: Arch) -> torch.Tensor:
    """q [R, H, D], k/v [R, KV, D] packed -> attention output [R, H*D] packed."""
    pr = lay.prompt_rows
    out_p = arch.sdpa(_per_sequence(q, pr), _per_sequence(k, pr), _per_sequence(v, pr), is_causal=True)
    tail_rows = lay.key_rows[:, -lay.logit_rows.shape[1]:]
    out_t = arch.sdpa(_per_sequence(q, tail_rows), _per_sequence(k, lay.key_rows),
                      _per_sequence(v, lay.key_rows), attn_mask=lay.key_mask)
    return torch.cat([_packed(out_p), _packed(out_t)])[lay.back]


def _qkv(layer, h, cos, sin, arch: Arch):
    """Normed rows -> q [R, H, D], k and v [R, KV, D], rotated; q/k/v as one matmul."""
    heads, kv_heads, d = arch.heads, arch.kv_heads, arch.head_dim
    attn = layer.self_attn
    qkv = arch.project(rms_norm(h, layer.input_layernorm.weight, arch.eps), attn.q_proj, attn.k_proj, attn.v_proj)
    qk, v = qkv.split([(heads + kv_heads) * d, kv_heads * d], dim=-1)
    q, k = rotary(qk.view(-1, heads + kv_heads, d), cos, sin).split([heads, kv_heads], dim=1)
    return q, k, v.view(-1, kv_heads, d)


def _mlp(layer, h: torch.Tensor, arch: Arch) -> torch.Tensor:
    mlp = layer.mlp
    gate, up = arch.project(rms_norm(h, layer.post_attention_layernorm.weight, arch.eps),
                            mlp.gate_proj, mlp.up_proj).chunk(2, dim=-1)
    return h + arch.project(F.silu(gate) * up, mlp.down_proj)


def _layer(layer, h, cos, sin, lay: Layout, arch: Arch) -> torch.Tensor:
    q, k, v = _qkv(layer, h, cos, sin, arch)
    h = h + arch.project(_attend(q, k, v, lay, arch), layer.self_attn.o_proj)
    return _mlp(layer, h, arch)


def _last_layer(layer, h, cos, sin, lay: Layout, arch: Arch) -> torch.Tensor:
    """The last layer's outputs [M, hidden] at lay.out_rows only: keys and values of every
    row, queries per logit slot, then output projection and MLP once per distinct row."""
    q, k, v = _qkv(layer, h, cos, sin, arch)
    o = arch.sdpa(_per_sequence(q, lay.logit_rows), _per_sequence(k, lay.key_rows),
                  _per_sequence(v, lay.key_rows), attn_mask=lay.logit_mask)
    h = h[lay.out_rows] + arch.project(_packed(o)[lay.out_slot], layer.self_attn.o_proj)
    return _mlp(layer, h, arch)


def _logits(model, h: torch.Tensor, arch: Arch) -> torch.Tensor:
    return arch.linear(rms_norm(h, model.model.norm.weight, arch.eps), model.lm_head.weight)


def packed_logprobs(model, episodes: list[Episode], temperature: float = 1.0,
                    trim: bool = True, exact: bool = False, head=None) -> torch.Tensor | None:
    """[N, T] logprobs of the tokens the model sampled after each episode's prompt, as
    `token_logprobs` over `collate(episodes)` gives, 0 elsewhere (prompt, observations,
    padding); None when the model is not covered, an episode has no prompt or nothing after
    it, or nothing in the batch was sampled. trim=False runs the last layer on every row and
    takes logits at every continuation slot (the same numbers up to float rounding).
    exact=True: attention in float64, rounded once (a batch-invariant fp32 engine's bits).
    head (train/chunked.py, not with exact): logprobs from the final hidden states, no logits."""
    if (not supports(model) or any(not 0 < e.prompt_len < len(e.tokens) for e in episodes)
            or not any(e.tokens_out for e in episodes) or (exact and has_lora(model))):
        return None
    check_temperature(temperature)
    cfg, inner = model.config, model.model
    lay = layout(episodes).to(inner.embed_tokens.weight.device)
    heads = cfg.num_attention_heads
    arch = Arch(heads, cfg.num_key_value_heads, getattr(cfg, "head_dim", None) or cfg.hidden_size // heads,
                cfg.rms_norm_eps, exact)
    h = F.embedding(lay.ids, inner.embed_tokens.weight)
    cos, sin = inner.rotary_emb(h[None], lay.positions[None])
    cos, sin = cos[0, :, None], signed_sines(sin[0])[:, None]  # [R, 1, D]
    *layers, last = inner.layers
    for layer in layers:
        h = run_layer(_layer, layer, h, cos, sin, lay, arch)
    width = max(len(e.tokens) for e in episodes)
    if head is not None:
        out = run_layer(_last_layer, last, h, cos, sin, lay, arch)[lay.slot_out] if trim else \
            run_layer(_layer, last, h, cos, sin, lay, arch)[lay.logit_rows]
        hidden = rms_norm(out, inner.norm.weight, arch.eps)
        lp = head_logprobs(head, hidden, model.lm_head.weight, lay.targets, lay.valid, temperature)
        return placed(lp, lay.tail_pos, width)
    if trim:  # the last layer and the logits only on the distinct rows that make logits
        logits = _logits(model, run_layer(_last_layer, last, h, cos, sin, lay, arch), arch)[lay.slot_out]
    else:
        logits = _logits(model, run_layer(_layer, last, h, cos, sin, lay, arch)[lay.logit_rows], arch)
    return continuation_logprobs(logits, lay.targets, lay.valid, lay.tail_pos, width, temperature)
