"""stop_all_but_servers(), the end of the agent phase: processes holding a listening socket
(TCP or Unix) stay and still answer; every other leftover is killed; close() kills all."""

import os

import pytest

from posttrain.sandbox import SandboxSpec, open_sandbox

START = ("cd /tmp\n"
         "nohup python3 -m http.server 8766 >/dev/null 2>&1 &\n"
         "nohup python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.bind('/tmp/u.sock');"
         " s.listen(); s.accept()\" >/dev/null 2>&1 &\n"
         "nohup sh -c 'while :; do sleep 0.05; done' >/dev/null 2>&1 &\n"
         "for i in $(seq 100); do [ -S /tmp/u.sock ] && python3 -c \"import socket; "
         "socket.create_connection(('127.0.0.1', 8766)).close()\" 2>/dev/null && exit 0;"
         " sleep 0.1; done; exit 1\n")
# [x] patterns: the command line of the bash running this must not match itself
ALIVE = "pgrep -f 'http[.]server' >/dev/null && echo tcp; pgrep -f 'AF_[U]NIX' >/dev/null && " \
        "echo unix; pgrep -f 'while [:]' >/dev/null && echo loop; true"


def _leftovers(marker: bytes) -> list[int]:
    out = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker in open(f"/proc/{name}/cmdline", "rb").read():
                out.append(int(name))
        except OSError:
            pass
    return out


def _check(spec_backend: str, wait_until) -> None:
    with open_sandbox(spec_backend, SandboxSpec()) as sb:
        assert sb.exec(START, timeout_s=30).exit_code == 0
        assert sb.exec(ALIVE).stdout.split() == ["tcp", "unix", "loop"]
        sb.stop_all_but_servers()
        assert sb.exec(ALIVE).stdout.split() == ["tcp", "unix"]
        assert sb.exec("python3 -c \"import socket; socket.create_connection(('127.0.0.1', "
                       "8766)).close()\"").exit_code == 0
    wait_until(lambda: not _leftovers(b"http.server\x008766"), "the server dies with its sandbox")


def test_servers_stay_the_rest_go_bwrap(wait_until):
    _check("bwrap", wait_until)


@pytest.mark.slow
def test_servers_stay_the_rest_go_docker(docker_engine, wait_until):
    _check("docker", wait_until)
