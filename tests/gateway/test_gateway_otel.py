"""OpenTelemetry: the gateway process exports one span per call to a real OTLP/HTTP receiver on loopback."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from gateway_servers import backend, free_port, gateway, running, toml_config
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from posttrain.gateway.keys import key_toml, new_key


def receiver() -> tuple[ThreadingHTTPServer, list]:
    """An OTLP/HTTP trace endpoint that keeps every span it is sent."""
    spans = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            request = ExportTraceServiceRequest.FromString(body)
            for resource in request.resource_spans:
                service = {a.key: a.value.string_value for a in resource.resource.attributes}["service.name"]
                for scope in resource.scope_spans:
                    spans.extend((service, s) for s in scope.spans)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, spans


def attributes(span) -> dict:
    out = {}
    for a in span.attributes:
        v = a.value
        out[a.key] = v.string_value if v.HasField("string_value") else v.int_value if v.HasField("int_value") else v.double_value
    return out


def test_every_call_becomes_a_span_with_its_variant_status_and_tokens(tmp_path):
    server, spans = receiver()
    b, g = free_port(), free_port()
    secret, record = new_key("team")
    otel = f'[otel]\nendpoint = "http://127.0.0.1:{server.server_port}/v1/traces"\nservice_name = "gw-test"\n'
    (tmp_path / "gw.toml").write_text(toml_config(g, tmp_path / "audit.sqlite", {"standard": [b]},
                                                  extra=key_toml(record) + otel))
    body = {"model": "standard", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    with running(backend(b, serves=["standard"]), gw := gateway(tmp_path / "gw.toml", g)):
        url = f"http://127.0.0.1:{g}/v1/chat/completions"
        for _ in range(2):
            assert httpx.post(url, json=body, headers={"Authorization": f"Bearer {secret}"}, timeout=30).status_code == 200
        assert httpx.post(url, json=body, headers={"Authorization": "Bearer pt-nope-nope"}, timeout=30).status_code == 401
        gw.stop()  # a clean shutdown exports what is pending
    server.shutdown()
    assert {service for service, _ in spans} == {"gw-test"}
    calls = [attributes(s) for _, s in spans if s.name == "gateway call"]
    rejected = [attributes(s) for _, s in spans if s.name == "gateway rejected"]
    assert len(calls) == 2 and len(rejected) == 1
    assert all(c["posttrain.variant"] == "standard" and c["posttrain.status"] == 200 and c["posttrain.tokens_out"] == 3
               for c in calls)
    assert rejected[0]["posttrain.status"] == 401 and rejected[0]["posttrain.key_hash"] == "invalid"
    assert all(s.end_time_unix_nano > s.start_time_unix_nano for _, s in spans)
