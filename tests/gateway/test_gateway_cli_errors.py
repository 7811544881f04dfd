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
