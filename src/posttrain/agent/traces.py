"""Per-step traces: an episode as one OpenTelemetry trace, a root span for the episode and one
child span per step (each model call, each command, the verifier) with its tokens, latency and
exit code. Exported as the gateway's spans are (posttrain/otel.py), after the episode ends, from
the Steps the loop recorded, so the loop itself never waits on the exporter."""

from __future__ import annotations

from posttrain.otel import OtelConfig, span_provider
from posttrain.types import Episode, Step


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _attributes(step: Step) -> dict:
    attrs = {"posttrain.turn": step.turn, "posttrain.latency_s": step.duration_s}
    attrs |= {f"posttrain.{k}": v for k, v in step.attributes.items() if v is not None}
    return attrs


class EpisodeTracer:
    """`EpisodeTracer(OtelConfig(...))` sends to a collector; `exporter` replaces it (tests)."""

    def __init__(self, config: OtelConfig | None = None, exporter=None):
        from opentelemetry import trace

        self._trace = trace
        self.provider = span_provider(config or OtelConfig(service_name="posttrain-agent"), exporter)
        self.tracer = self.provider.get_tracer("posttrain.agent")

    def export(self, ep: Episode) -> None:
        if not ep.steps:
            return
        start = min(s.start_s for s in ep.steps)
        end = max(s.start_s + s.duration_s for s in ep.steps)
        root = self.tracer.start_span("episode", start_time=_ns(start), attributes={
            "posttrain.task": ep.task_id, "posttrain.group": ep.group_id, "posttrain.status": ep.status,
            "posttrain.reward": ep.reward, "posttrain.turns": len(ep.turns),
            "posttrain.retries": ep.retries, "posttrain.error": ep.error[:300]})
        parent = self._trace.set_span_in_context(root)
        for step in ep.steps:
            span = self.tracer.start_span(step.kind, context=parent, start_time=_ns(step.start_s),
                                          attributes=_attributes(step))
            span.end(end_time=_ns(step.start_s + step.duration_s))
        root.end(end_time=_ns(end))

    def close(self) -> None:
        """Export what is pending, then stop."""
        self.provider.shutdown()
