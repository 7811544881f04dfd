"""Prometheus metrics of the gateway (prometheus_client, one registry per app)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class GatewayMetrics:
    def __init__(self, pool):
        self.registry = r = CollectorRegistry()
        self.requests = Counter("posttrain_gateway_requests", "requests answered", ["variant", "status", "key"], registry=r)
        self.latency = Histogram("posttrain_gateway_request_seconds", "end-to-end latency", ["variant"],
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.tokens = Counter("posttrain_gateway_tokens", "tokens by direction", ["variant", "direction", "key"], registry=r)
        self.retries = Counter("posttrain_gateway_upstream_failures", "upstream failures retried elsewhere",
                               ["backend"], registry=r)
        self.healthy = Gauge("posttrain_gateway_backend_healthy", "1 if the backend takes traffic",
                             ["variant", "backend"], registry=r)
        for b in pool.all():
            self.healthy.labels(b.variant, b.url).set_function(lambda b=b: 1.0 if b.healthy else 0.0)
        self._children: dict[tuple, tuple] = {}

    def observe(self, variant: str, status: int, key: str, latency_s: float, tokens_in: int, tokens_out: int) -> None:
        ident = (variant, status, key)
        c = self._children.get(ident)
        if c is None:  # label lookups cost microseconds; keep the children
            c = self._children[ident] = (self.requests.labels(variant, str(status), key), self.latency.labels(variant),
                                         self.tokens.labels(variant, "in", key), self.tokens.labels(variant, "out", key))
        c[0].inc()
        c[1].observe(latency_s)
        if tokens_in:
            c[2].inc(tokens_in)
        if tokens_out:
            c[3].inc(tokens_out)

    def render(self) -> bytes:
        return generate_latest(self.registry)
