"""Optional OpenTelemetry export: one span per gateway call, sent over OTLP/HTTP in batches.

Off unless the config has an `[otel]` table; then it needs the `otel` extra
(pip install -c constraints.txt -e '.[otel]'). Spans are built after the call, from what the
audit row holds, and handed to the SDK's batch processor (its own thread), so the request path
pays only for building one span object.
"""

from __future__ import annotations

import time

from posttrain.gateway.config import Otel

ATTRIBUTES = ("variant", "backend", "status", "tokens_in", "tokens_out", "key_hash", "route", "weights_version",
              "session", "cost_usd")


class Tracer:
    def __init__(self, config: Otel):
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as e:
            raise RuntimeError("[otel] in the gateway config needs the otel extra: "
                               "pip install -c constraints.txt -e '.[otel]'") from e
        self.provider = TracerProvider(resource=Resource.create({"service.name": config.service_name}))
        self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=config.endpoint,
                                                                             headers=config.headers)))
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
