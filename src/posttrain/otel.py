"""OpenTelemetry export, shared by the gateway (a span per call) and the agent (a span per step):
spans go to an OTLP/HTTP collector in batches, from the SDK's own thread. Needs the `otel` extra
(pip install -c constraints.txt -e '.[otel]'); nothing imports it unless a config asks for it."""

from __future__ import annotations

from urllib.parse import urlparse

from pydantic import field_validator

from posttrain.config_base import StrictModel


def check_endpoint(url: str) -> str:
    """An OTLP/HTTP endpoint must be an http(s) URL with a host: checked when a config or flag is
    read, not when the first span is exported mid-run."""
    parts = urlparse(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"OTLP endpoint {url!r} is not an http(s) URL (e.g. http://127.0.0.1:4318/v1/traces)")
    return url


class OtelConfig(StrictModel):
    endpoint: str = "http://127.0.0.1:4318/v1/traces"
    service_name: str = "posttrain"
    headers: dict[str, str] = {}        # e.g. the collector's auth header

    @field_validator("endpoint")
    @classmethod
    def _a_url(cls, v: str) -> str:
        return check_endpoint(v)


def span_provider(config: OtelConfig, exporter=None):
    """A TracerProvider batching spans to the config's OTLP endpoint (or to `exporter`)."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as e:
        raise RuntimeError("OpenTelemetry export ([otel] / [agent.otel] in the config) needs the otel "
                           "extra: pip install -c constraints.txt -e '.[otel]'") from e
    provider = TracerProvider(resource=Resource.create({"service.name": config.service_name}))
    exporter = exporter or OTLPSpanExporter(endpoint=config.endpoint, headers=config.headers)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider
