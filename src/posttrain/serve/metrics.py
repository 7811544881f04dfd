"""Prometheus text exposition of the server's counters and the engine's gauges."""

from __future__ import annotations

from collections import Counter


class Metrics:
    def __init__(self, engine, loop):
        self.engine = engine
        self.loop = loop
        self.counters: Counter[str] = Counter()

    def count(self, name: str, value: int = 1) -> None:
        self.counters[name] += value

    def render(self) -> str:
        e, s = self.engine, self.engine.stats
        lines = []

        def add(name: str, kind: str, value, help_: str):
            lines.extend([f"# HELP posttrain_{name} {help_}", f"# TYPE posttrain_{name} {kind}", f"posttrain_{name} {value}"])

        for kind in ("completion", "chat"):
            add(f"requests_{kind}_total", "counter", self.counters[f"requests_{kind}"], f"{kind} requests received")
        add("sequences_total", "counter", self.counters["sequences"], "sequences submitted for generation (prompts x n)")
        add("request_errors_total", "counter", self.counters["errors"] + self.loop.errors, "requests answered with an error")
        add("client_disconnects_total", "counter", self.counters["disconnects"], "requests aborted because their client went away")
        add("prompt_tokens_computed_total", "counter", s.prefill_tokens, "prompt tokens run through the model")
        add("prefix_cache_hit_tokens_total", "counter", e.blocks.hit_tokens, "prompt tokens served from the prefix cache")
        add("generation_tokens_total", "counter", s.generated_tokens, "tokens generated")
        add("spec_draft_tokens_total", "counter", s.spec_proposed, "speculative tokens proposed")
        add("spec_accepted_tokens_total", "counter", s.spec_accepted, "speculative tokens accepted")
        add("preemptions_total", "counter", e.scheduler.num_preempted, "sequences preempted for recompute")
        add("engine_steps_total", "counter", s.steps, "engine steps run")
        add("running_sequences", "gauge", len(e.scheduler.running), "sequences being decoded")
        add("waiting_sequences", "gauge", len(e.scheduler.waiting), "sequences waiting for KV blocks")
        add("kv_blocks_free", "gauge", e.blocks.num_free, "KV blocks free or evictable")
        add("kv_blocks_total", "gauge", e.num_blocks, "KV blocks in the cache")
        add("policy_version", "gauge", e.policy_version, "weights version being served")
        lines.extend(["# HELP posttrain_engine_info the engine's compute dtype and why it was chosen",
                      "# TYPE posttrain_engine_info gauge",
                      f'posttrain_engine_info{{dtype="{e.dtype.name}",reason="{e.dtype.reason}",packed="{int(e.packed)}",'
                      f'weights="{e.config.weights}"}} 1'])
        return "\n".join(lines) + "\n"
