"""Bad command-line input fails in one line, exit 2, before any long work: ranges, paths, ports."""

import socket
import subprocess
import sys

import pytest


def _cli(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "posttrain.cli", *args],
                          capture_output=True, text=True, timeout=timeout)


def _one_line_error(r, message):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().count("\n") == 0, r.stderr


@pytest.mark.parametrize("args, message", [
    (["serve", "--model", "m", "--port", "0"], "1..65535"),
    (["serve", "--model", "m", "--port", "70000"], "1..65535"),
    (["serve", "--model", "m", "--threads", "0"], "'--threads'"),
    (["serve", "--model", "m", "--max-num-seqs", "0"], "'--max-num-seqs'"),
    (["plan-kv", "--model", "tiny", "--context", "10", "--block-size", "0"], "'--block-size'"),
    (["sandbox", "run", "--timeout", "0", "--", "true"], "greater than 0"),
    (["sandbox", "run", "--memory-mb", "0", "--", "true"], "'--memory-mb'"),
    (["sandbox", "run", "--cpus", "-1", "--", "true"], "greater than 0"),
    (["eval", "--tasks", "t", "--model", "m", "-k", "0"], "'-k'"),
    (["eval", "--tasks", "t", "--model", "m", "--agent-timeout", "0"], "greater than 0"),
    (["eval", "--tasks", "t", "--model", "m", "--top-p", "1.5"], "(0, 1]"),
    (["validate", "t", "--pass-threshold", "2"], "[0, 1]"),
])
def test_out_of_range_values(args, message):
    _one_line_error(_cli(*args), message)


def test_a_file_where_a_directory_is_expected(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    _one_line_error(_cli("eval", "--tasks", str(f), "--model", "m"), "is a file; a directory")
    _one_line_error(_cli("tasks", "generate", str(f), "--n", "1"), "is a file; a directory")


def test_an_output_that_cannot_be_written(tmp_path):
    (tmp_path / "t").mkdir()
    _one_line_error(_cli("tasks", "generate", "/proc/posttrain-out", "--n", "1"), "not writable")
    _one_line_error(_cli("validate", str(tmp_path / "t"), "--out", "/proc/posttrain-out/v.json"),
                    "not writable")


def test_a_busy_port_fails_before_the_model_loads():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = _cli("serve", "--model", "no-such-model-dir", "--port", str(port))
    _one_line_error(r, f"port {port} on 127.0.0.1 is in use")
