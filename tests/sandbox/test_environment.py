"""The Dockerfile subset that runs without Docker, and its clear errors."""

import io
import tarfile

import pytest

from posttrain.errors import SandboxError
from posttrain.sandbox.environment import parse_dockerfile, prepare_environment


def _write(env, dockerfile, **files):
    env.mkdir(exist_ok=True)
    (env / "Dockerfile").write_text(dockerfile)
    for name, text in files.items():
        path = env / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return env


def test_parse_joins_continuations_and_drops_comments():
    steps = parse_dockerfile("# c\nFROM debian:bookworm\nENV A=1 \\\n  B=2\n\ncopy x /app/\n")
    assert steps == [("FROM", "debian:bookworm"), ("ENV", "A=1 B=2"), ("COPY", "x /app/")]


def test_subset_applies(sandbox, tmp_path):
    env = _write(tmp_path / "environment",
                 'FROM ubuntu:24.04\nWORKDIR /app/work\nENV GREETING="hello world" N=3\n'
                 'ENV LEGACY some value\nCOPY data.txt ./\nCOPY src/ /app/src\n'
                 'COPY ["data.txt", "/app/renamed.txt"]\nLABEL a=b\n',
                 **{"data.txt": "d\n", "src__main.py": "print(1)\n"})
    prepare_environment(env, sandbox)
    r = sandbox.exec('pwd; echo "$GREETING|$N|$LEGACY"; cat data.txt /app/src/main.py '
                     "/app/renamed.txt")
    assert r.stdout.splitlines() == ["/app/work", "hello world|3|some value", "d", "print(1)", "d"]


def test_add_unpacks_local_tar(sandbox, tmp_path):
    env = tmp_path / "environment"
    env.mkdir()
    with tarfile.open(env / "files.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo("inner.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"in\n"))
    _write(env, "FROM debian:bookworm-slim\nADD files.tar.gz /app/\n")
    prepare_environment(env, sandbox)
    assert sandbox.exec("cat /app/inner.txt").stdout == "in\n"


def test_no_dockerfile_is_nothing(sandbox, tmp_path):
    prepare_environment(tmp_path, sandbox)
    assert sandbox.exec("ls -A /app").stdout == ""


@pytest.mark.parametrize("dockerfile, word", [
    ("FROM debian:12\nRUN apt-get install -y git\n", "RUN"),
    ("FROM debian:12\nUSER nobody\n", "USER"),
    ("FROM python:3.12\n", "python"),
    ("FROM debian:12\nWORKDIR /opt/x\n", "/opt/x"),
    ("FROM debian:12\nCOPY missing.txt /app/\n", "missing.txt"),
    ("FROM debian:12\nCOPY ../../etc/passwd /app/\n", "passwd"),
    ("FROM debian:12\nADD https://example.com/x /app/\n", "remote"),
    ("FROM debian:12\nCOPY --from=build /x /app/\n", "--from"),
])
def test_unsupported_instructions_name_docker(sandbox, tmp_path, dockerfile, word):
    env = _write(tmp_path / "environment", dockerfile)
    with pytest.raises(SandboxError, match="docker") as e:
        prepare_environment(env, sandbox)
    assert word in str(e.value)
