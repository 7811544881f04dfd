"""Optional OpenTelemetry export: one span per gateway call, sent over OTLP/HTTP in batches
(posttrain/otel.py, which the agent's step traces use too).

Off unless the config has an `[otel]` table; then it needs the `otel` extra. Spans are built
after the call, from what the audit row holds, and handed to the SDK's batch processor (its own
thread), so the request path pays only for building one span object.
"""

from __future__ import annotations

import time

from posttrain.gateway.config import Otel
from posttrain.otel import span_provider

ATTRIBUTES = ("variant", "backend", "status", "tokens_in", "tokens_out", "key_hash", "route", "weights_version",
              "session", "cost_usd")


class Tracer:
    def __init__(self, config: Otel):
        self.provider = span_provider(config)
        self.tracer = self.provider.get_tracer("posttrain.gateway")

    def record(self, name: str, latency_s: float, fields: dict) -> None:
        """A finished call as a span that ended now and lasted `latency_s`."""
        end = time.time_ns()
        attrs = {f"posttrain.{k}": fields[k] for k in ATTRIBUTES if fields.get(k) is not None}
        span = self.tracer.start_span(name, start_time=end - int(latency_s * 1e9), attributes=attrs)
        span.end(end_time=end)

    def close(self) -> None:
        """Export what is pending, then stop (at shutdown)."""
        self.provider.shutdown()
