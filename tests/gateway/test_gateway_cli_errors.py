"""`posttrain gateway serve` says what is wrong in one line per problem, never a traceback."""

import socket
import subprocess
import sys


def serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "posttrain", "gateway", "serve", *args], capture_output=True,
                          text=True, timeout=120)


def test_config_errors_are_one_line_each_naming_the_key(tmp_path):
    (tmp_path / "g.toml").write_text('default_variant = "a"\n[variants.a]\nbackends = ["127.0.0.1:1/v1"]\n'
                                     "weights_version = 3\n")
    r = serve(str(tmp_path / "g.toml"))
    assert r.returncode != 0 and "Traceback" not in r.stderr and "errors.pydantic.dev" not in r.stderr, r.stderr
    assert "variants.a.backends: backend '127.0.0.1:1/v1' needs a scheme" in r.stderr
    assert "variants.a.weights_version: Input should be a valid string" in r.stderr


def test_a_port_in_use_is_one_line_and_non_zero(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (tmp_path / "g.toml").write_text(f'default_variant = "a"\nport = {port}\naudit_db = "{tmp_path}/a.sqlite"\n'
                                         '[variants.a]\nbackends = ["http://127.0.0.1:1/v1"]\n')
        r = serve(str(tmp_path / "g.toml"))
    assert r.returncode != 0 and "Traceback" not in r.stderr and f"cannot listen on 127.0.0.1:{port}" in r.stderr


def gateway_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "posttrain", "gateway", *args], capture_output=True,
                          text=True, timeout=120)


def one_line_error(r: subprocess.CompletedProcess) -> bool:
    return r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_audit_verify_and_replay_on_a_file_that_is_not_sqlite_are_one_line(tmp_path):
    (tmp_path / "notes.txt").write_text("not a database, just some text that is long enough\n" * 20)
    r = gateway_cli("audit", "verify", str(tmp_path / "notes.txt"))
    assert one_line_error(r) and "not a readable audit log" in r.stderr, r.stderr
    r = gateway_cli("replay", str(tmp_path / "notes.txt"), "--against", "a", "--gateway-url", "http://127.0.0.1:1/v1")
    assert one_line_error(r) and "not a readable audit log" in r.stderr, r.stderr


def test_replay_with_the_gateway_down_is_one_line(tmp_path):
    import sqlite3

    from posttrain.gateway.audit import AuditLog

    log = AuditLog(tmp_path / "a.sqlite")
    log.append(kind="call", variant="a", route="POST /v1/completions", status=200, request='{"prompt": "x"}',
               output="y", latency_ms=1.0)
    log.close()
    assert sqlite3.connect(tmp_path / "a.sqlite").execute("SELECT COUNT(*) FROM calls").fetchone()[0] == 1
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = gateway_cli("replay", str(tmp_path / "a.sqlite"), "--against", "a", "--gateway-url", f"http://127.0.0.1:{port}/v1")
    assert one_line_error(r) and "cannot reach the gateway" in r.stderr, r.stderr


def test_keys_new_refuses_a_negative_limit(tmp_path):
    r = gateway_cli("keys", "new", "alice", "--rpm", "-5")
    assert one_line_error(r) and "--rpm" in r.stderr and "greater than 0" in r.stderr, r.stderr
