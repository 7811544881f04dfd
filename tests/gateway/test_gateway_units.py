"""Keys, limits, routing and the audit chain, each on its own (no HTTP)."""

import sqlite3

import pytest

from posttrain.gateway.audit import AuditLog, verify
from posttrain.gateway.config import GatewayConfig
from posttrain.gateway.keys import KeyRing, key_toml, new_key
from posttrain.gateway.limits import LimitExceeded, Limiter, SlidingWindow
from posttrain.gateway.router import RouteError, Router


def config(**extra) -> GatewayConfig:
    variants = {"standard": {"backends": ["http://127.0.0.1:1/v1"]}, "fast": {"backends": ["http://127.0.0.1:2/v1"]},
                "int8": {"backends": ["http://127.0.0.1:3/v1"]}}
    return GatewayConfig.model_validate({"default_variant": "standard", "variants": variants, **extra})


def test_keys_are_stored_hashed_and_checked():
    secret, record = new_key("alice", variants=["fast"])
    assert secret not in record.model_dump_json()
    ring = KeyRing([record])
    assert ring.check(f"Bearer {secret}") == record
    assert ring.check(f"Bearer {secret}x") is None
    assert ring.check(f"Bearer pt-deadbeef-{secret.split('-', 2)[2]}") is None
    assert ring.check(None) is None and ring.check("Basic abc") is None


def test_key_blocks_are_valid_toml():
    import tomllib

    _, record = new_key("ops", variants=["fast"], tpm=10, budget_usd=1.5, admin=True)
    parsed = tomllib.loads(key_toml(record))["keys"][0]
    assert parsed == record.model_dump(exclude_none=True)


def test_config_rejects_unknown_variants_and_exposure_without_keys():
    with pytest.raises(ValueError, match="nope"):
        config(routes=[{"variant": "nope"}])
    with pytest.raises(ValueError, match="without API keys"):
        config(host="0.0.0.0").check_exposure()
    config(host="127.0.0.1").check_exposure()
    _, record = new_key("a")
    config(host="0.0.0.0", keys=[record.model_dump()]).check_exposure()


def test_config_refuses_a_backend_without_a_scheme():
    with pytest.raises(ValueError, match="needs a scheme: write http://127.0.0.1:8000/v1"):
        GatewayConfig.model_validate({"variants": {"a": {"backends": ["127.0.0.1:8000/v1"]}}})


def test_error_code_is_a_string_or_null():
    import json

    from posttrain.openai_errors import error_body
    assert json.loads(error_body(400, "bad", code=400))["error"]["code"] == "400"
    assert json.loads(error_body(400, "bad"))["error"]["code"] is None


def test_window_reserves_then_refunds():
    w = SlidingWindow(100)
    entry = w.grant(80, now=0.0)
    assert w.wait_for(30, now=1.0) == pytest.approx(59.0)   # 80 + 30 > 100 until the grant expires
    w.settle(entry, 20, now=2.0)                             # only 20 were used
    assert w.wait_for(30, now=2.0) == 0.0
    assert w.wait_for(101, now=2.0) is None
    assert w.wait_for(100, now=60.5) == 0.0                  # the grant slid out of the window


def test_limiter_never_grants_more_than_the_limit():
    _, key = new_key("k", tpm=1000, rpm=50)
    lim = Limiter([key])
    granted = []
    for _ in range(40):
        try:
            granted.append(lim.admit(key, 300, 0.0))
        except LimitExceeded as e:
            assert e.code == "rate_limit_exceeded" and e.retry_after_s > 0
    assert len(granted) == 3                                  # 3 x 300 <= 1000 < 4 x 300
    lim.settle(granted[0], 100, 0.0)                          # refund 200: 700 granted
    lim.admit(key, 300, 0.0)                                  # 1000: exactly the limit
    with pytest.raises(LimitExceeded):
        lim.admit(key, 1, 0.0)
    with pytest.raises(LimitExceeded, match="limit is 1000"):
        lim.admit(key, 5000, 0.0)


def test_budget_counts_reservations_and_spend():
    _, key = new_key("k", budget_usd=1.0)
    lim = Limiter([key], {key.hash[:16]: 0.5})
    a = lim.admit(key, 10, 0.4)
    with pytest.raises(LimitExceeded) as e:
        lim.admit(key, 10, 0.2)                               # 0.5 spent + 0.4 reserved + 0.2 > 1
    assert e.value.code == "insufficient_quota"
    lim.settle(a, 10, 0.1)
    lim.admit(key, 10, 0.2)


def test_router_explicit_scopes_routes_and_pins():
    _, key = new_key("k", variants=["standard", "fast"])
    cfg = config(routes=[{"variant": "fast", "latency_class": "fast"},
                         {"variant": "int8", "min_prompt_chars": 1000}])
    r = Router(cfg)
    assert r.choose("fast", {}, None, 0) == ("fast", "explicit")
    with pytest.raises(RouteError) as e:
        r.choose("gpt-9", {}, None, 0)
    assert e.value.status == 404
    with pytest.raises(RouteError) as e:
        r.choose("int8", {}, key, 0)
    assert e.value.status == 403
    assert r.choose("auto", {"x-latency-class": "fast"}, None, 0) == ("fast", "route0")
    assert r.choose("auto", {}, None, 5000) == ("int8", "route1")
    assert r.choose("auto", {}, key, 5000) == ("standard", "default")  # the key may not use int8
    assert r.choose("auto", {"x-session-id": "s1"}, None, 0)[0] == "standard"
    # the session keeps its variant even when the request would now route elsewhere
    assert r.choose("auto", {"x-session-id": "s1", "x-latency-class": "fast"}, None, 0) == ("standard", "session")


def test_canary_splits_by_session_and_keeps_sessions_whole():
    r = Router(config(canary={"candidate": "fast", "baseline": "standard", "share": 0.3}))
    picks = {f"s{i}": r.choose("auto", {"x-session-id": f"s{i}"}, None, 0)[0] for i in range(2000)}
    share = sum(v == "fast" for v in picks.values()) / len(picks)
    assert 0.25 < share < 0.35
    again = {s: r.choose("auto", {"x-session-id": s}, None, 0)[0] for s in list(picks)[:100]}
    assert all(again[s] == picks[s] for s in again)
    assert Router(config(canary={"candidate": "fast", "baseline": "standard"}), canary_share=0.0).choose(
        "auto", {"x-session-id": "s1"}, None, 0)[0] == "standard"


def test_audit_chain_verifies_and_detects_edits_and_deletions(tmp_path):
    db = tmp_path / "audit.sqlite"
    log = AuditLog(str(db))
    for i in range(500):
        log.append(kind="call", key_hash="k", variant="standard", tokens_in=i, tokens_out=2 * i, status=200,
                   latency_ms=1.5, seed=i, request='{"x": 1}')
    log.close()                                               # drains the queue: nothing lost
    v = verify(str(db))
    assert v.ok and v.rows == 500
    con = sqlite3.connect(db)
    con.execute("UPDATE calls SET tokens_out = 0 WHERE id = 250")
    con.commit()
    v = verify(str(db))
    assert not v.ok and v.first_bad_id == 250 and "modified" in v.reason
    con.execute("UPDATE calls SET tokens_out = 498 WHERE id = 250")
    con.execute("DELETE FROM calls WHERE id = 100")
    con.commit()
    v = verify(str(db))
    assert not v.ok and v.first_bad_id == 101 and "deleted" in v.reason
    # a reopened log continues the chain
    con.execute("DELETE FROM calls WHERE id >= 100")
    con.commit()
    log = AuditLog(str(db))
    log.append(kind="call", status=200)
    log.close()
    assert verify(str(db)).ok and verify(str(db)).rows == 100


def test_a_second_writer_on_one_audit_log_is_refused(tmp_path):
    from posttrain.gateway.audit import AuditLocked
    first = AuditLog(str(tmp_path / "a.sqlite"))
    with pytest.raises(AuditLocked, match="in use by another gateway"):
        AuditLog(str(tmp_path / "a.sqlite"))
    first.close()
    AuditLog(str(tmp_path / "a.sqlite")).close()  # free again once the first has closed
