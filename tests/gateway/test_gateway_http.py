"""The gateway as a real process on loopback in front of real scripted backends."""

import json
import subprocess
import sys
import time

import httpx
import pytest
from gateway_servers import backend, free_port, gateway, served_by, toml_config

from posttrain.gateway.keys import key_toml, new_key

CHAT = {"model": "auto", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """Backends: two for standard, one for fast, one always 500, one always 400; a keyed gateway."""
    tmp = tmp_path_factory.mktemp("gw")
    ports = {n: free_port() for n in ("s1", "s2", "fast", "e500", "e400", "gw")}
    variants = {"standard": [ports["s1"], ports["s2"]], "fast": [ports["fast"]],
                "flaky": [ports["e500"], ports["fast"]], "bad": [ports["e400"]]}
    fails = {"e500": ("--fail-status", "500"), "e400": ("--fail-status", "400")}
    procs = [backend(ports[n], *fails.get(n, ()), serves=served_by(variants, ports[n]))
             for n in ("s1", "s2", "fast", "e500", "e400")]
    full, full_rec = new_key("full")
    small, small_rec = new_key("small", tpm=300, variants=["standard"])
    cfg = toml_config(ports["gw"], tmp / "audit.sqlite", variants,
                      extra="".join(key_toml(r) for r in (full_rec, small_rec)), max_body_bytes=4096)
    cfg = cfg.replace('[variants.bad]\n', '[variants.bad]\nfallback = ["fast"]\n')
    (tmp / "gateway.toml").write_text(cfg)
    gw = gateway(tmp / "gateway.toml", ports["gw"])
    try:  # stop whatever started, even when a later start fails
        for p in procs + [gw]:
            p.start()
        yield {"url": f"http://127.0.0.1:{ports['gw']}", "full": full, "small": small, "procs": procs, "ports": ports,
               "tmp": tmp, "gw": gw}
    finally:
        for p in [gw] + procs:
            p.stop()


def post(stack, body, key="full", path="/v1/chat/completions", **kw):
    headers = {"Authorization": f"Bearer {stack[key]}"} if key else {}
    headers.update(kw.pop("headers", {}))
    return httpx.post(stack["url"] + path, json=body, headers=headers, timeout=30, **kw)


def assert_openai_error(r, status, code=None):
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and "Traceback" not in r.text
    assert err["code"] is None or isinstance(err["code"], str)
    if code:
        assert err["code"] == code
    if status == 401:                       # as OpenAI's API types a bad or missing key
        assert err["type"] == "authentication_error"


def test_bad_input_answers_openai_errors(stack):
    assert_openai_error(post(stack, CHAT, key=None), 401, "invalid_api_key")
    assert_openai_error(post(stack, CHAT, headers={"Authorization": "Bearer pt-0000-nope"}, key=None), 401)
    bad = httpx.post(stack["url"] + "/v1/chat/completions", content=b"{not json",
                     headers={"Authorization": f"Bearer {stack['full']}"})
    assert_openai_error(bad, 400, "invalid_json")
    assert_openai_error(post(stack, {**CHAT, "model": "gpt-17"}), 404, "model_not_found")
    assert_openai_error(post(stack, {**CHAT, "model": "fast"}, key="small"), 403)
    big = {**CHAT, "messages": [{"role": "user", "content": "x" * 10_000}]}
    assert_openai_error(post(stack, big), 413, "body_too_large")
    assert_openai_error(httpx.get(stack["url"] + "/v1/nothing"), 404)


def test_every_bad_input_case_answers_openai_errors(stack):
    full = stack["full"]
    known_id = full.split("-")[1]
    assert_openai_error(post(stack, CHAT, key=None, headers={"Authorization": f"Bearer pt-{known_id}-wrongsecret"}), 401)
    assert_openai_error(post(stack, CHAT, key=None, headers={"Authorization": full}), 401)  # no "Bearer "
    assert_openai_error(httpx.get(stack["url"] + "/v1/models"), 401, "invalid_api_key")
    not_object = httpx.post(stack["url"] + "/v1/chat/completions", content=b"[1, 2]",
                            headers={"Authorization": f"Bearer {full}"})
    assert_openai_error(not_object, 400, "invalid_json")
    not_utf8 = httpx.post(stack["url"] + "/v1/completions", content=b'{"prompt": "\xff\xfe"}',
                          headers={"Authorization": f"Bearer {full}"})
    assert_openai_error(not_utf8, 400)
    for field, value in (("messages", 5), ("messages", [{"content": 5}]), ("model", ["standard"]),
                         ("max_tokens", "7"), ("stream", "yes"), ("n", 1.5)):
        r = post(stack, {**CHAT, field: value})
        assert_openai_error(r, 400, "invalid_request")
        assert r.json()["error"]["param"] == field
    assert_openai_error(post(stack, {"model": "auto", "prompt": {"a": 1}}, path="/v1/completions"), 400, "invalid_request")
    assert_openai_error(post(stack, CHAT, headers={"X-Posttrain-Variant": "nope"}), 404, "model_not_found")

    def chunks():  # no content-length: the gateway must stop reading at the cap, not buffer it all
        for _ in range(64):
            yield b"x" * 1024

    chunked = httpx.post(stack["url"] + "/v1/chat/completions", content=chunks(),
                         headers={"Authorization": f"Bearer {full}", "content-type": "application/json"})
    assert_openai_error(chunked, 413, "body_too_large")
    assert_openai_error(httpx.get(stack["url"] + "/v1/chat/completions"), 405)


def test_token_limit_reserves_and_answers_429_with_retry_after(stack):
    # the prompt bound is 5 bytes + 8 template tokens = 13; the backend uses 10 + 8 = 18 tokens
    assert post(stack, {**CHAT, "max_tokens": 200}, key="small").status_code == 200  # reserves 213, uses 18
    assert post(stack, {**CHAT, "max_tokens": 260}, key="small").status_code == 200  # 18 + 273 <= 300: refunded
    r = post(stack, {**CHAT, "max_tokens": 260}, key="small")                         # 36 + 273 > 300
    assert_openai_error(r, 429, "rate_limit_exceeded")
    assert int(r.headers["retry-after"]) >= 1
    assert_openai_error(post(stack, {**CHAT, "max_tokens": 5000}, key="small"), 429, "request_too_large")


def test_sessions_stay_on_one_variant_and_responses_name_it(stack):
    seen = {post(stack, CHAT, headers={"X-Session-Id": "agent-1"}).headers["x-posttrain-variant"] for _ in range(5)}
    assert seen == {"standard"}
    r = post(stack, CHAT, headers={"X-Posttrain-Variant": "fast"})
    assert r.headers["x-posttrain-variant"] == "fast" and r.json()["model"] == "fast"


def test_5xx_fails_over_and_4xx_does_not(stack):
    for stream in (False, True):
        for _ in range(4):
            r = post(stack, {**CHAT, "model": "flaky", "stream": stream})
            assert r.status_code == 200
            assert (r.text.rstrip().endswith("data: [DONE]") if stream else r.json()["choices"])
    r = post(stack, {**CHAT, "model": "bad"})  # a 400 is the client's fault: no fallback to `fast`
    assert r.status_code == 400
    failures = [line for line in httpx.get(stack["url"] + "/metrics").text.splitlines()
                if line.startswith("posttrain_gateway_upstream_failures_total")]
    assert any(f':{stack["ports"]["e500"]}/v1' in line for line in failures)
    assert not any(f':{stack["ports"]["e400"]}/v1' in line for line in failures)


def test_killed_backend_is_retried_cooled_and_readmitted(stack):
    victim = stack["procs"][0]
    victim.stop()
    codes = [post(stack, {**CHAT, "model": "standard"}).status_code for _ in range(12)]
    assert codes == [200] * 12
    url = f"http://127.0.0.1:{stack['ports']['s1']}/v1"
    assert httpx.get(stack["url"] + "/health").json()["backends"][url]["healthy"] is False
    victim.start()
    deadline = time.monotonic() + 10
    while not httpx.get(stack["url"] + "/health").json()["backends"][url]["healthy"]:
        assert time.monotonic() < deadline, "backend never re-admitted"
        time.sleep(0.1)


def test_every_call_is_audited_and_the_chain_verifies(stack):
    before = stack["gw"]
    for _ in range(5):
        post(stack, CHAT)
    before.stop()  # SIGTERM: a clean shutdown drains the audit queue
    db = stack["tmp"] / "audit.sqlite"
    import sqlite3

    con = sqlite3.connect(db)
    statuses = [s for (s,) in con.execute("SELECT status FROM calls")]
    assert len(statuses) >= 30 and {200, 400, 401, 403, 404, 413, 429} <= set(statuses)
    cli = [sys.executable, "-m", "posttrain", "gateway", "audit", "verify", str(db)]
    assert subprocess.run(cli, capture_output=True).returncode == 0
    con.execute("UPDATE calls SET tokens_out = tokens_out + 1 WHERE id = 3")
    con.commit()
    r = subprocess.run(cli, capture_output=True, text=True)
    assert r.returncode == 1 and "row 3" in r.stderr
    stack["gw"].start()  # later tests (if any) get a gateway again


def test_refuses_to_listen_exposed_without_keys(tmp_path):
    cfg = toml_config(free_port(), tmp_path / "a.sqlite", {"standard": [1]})
    (tmp_path / "g.toml").write_text(cfg)
    r = subprocess.run([sys.executable, "-m", "posttrain", "gateway", str(tmp_path / "g.toml"), "--host", "0.0.0.0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "without API keys" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "a.sqlite").exists()


def test_a_backend_not_serving_the_model_id_is_unhealthy_with_the_reason(tmp_path):
    right, wrong, g = free_port(), free_port(), free_port()
    (tmp_path / "g.toml").write_text(toml_config(g, tmp_path / "a.sqlite", {"standard": [right], "fast": [wrong]}))
    procs = [backend(right, serves=["standard"]), backend(wrong, serves=["other-model"]), gateway(tmp_path / "g.toml", g)]
    try:
        for p in procs:
            p.start()
        deadline, health = time.monotonic() + 30, lambda port: backends_health(g)[f"http://127.0.0.1:{port}/v1"]
        while not health(wrong)["reason"]:
            assert time.monotonic() < deadline, "the start-up probe never ran"
            time.sleep(0.05)
        bad, good = health(wrong), health(right)
        assert bad["healthy"] is False
        assert "does not serve model 'fast'" in bad["reason"] and "['other-model']" in bad["reason"]
        assert good["healthy"] is True and good["reason"] == ""
    finally:
        for p in reversed(procs):
            p.stop()


def backends_health(gateway_port: int) -> dict:
    return httpx.get(f"http://127.0.0.1:{gateway_port}/health").json()["backends"]
