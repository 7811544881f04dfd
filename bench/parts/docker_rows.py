"""The docker rows of bench/sandbox.py: the same measurements for the docker backend, in
the same run as bwrap's (needs a Docker engine; `bash scripts/ci/docker.sh` starts one).

  cold start   open + prepare_environment (image already cached) + exec("true") + close
  warm exec    exec("true") in a running container (`docker exec`)
  build        a small task image: uncached (a fresh context each time) and cached
               (the same context again: a content-hash hit, no engine build)
"""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path

from posttrain.errors import SandboxError
from posttrain.sandbox import SandboxSpec, open_sandbox
from posttrain.sandbox.docker.cli import engine_cli
from posttrain.sandbox.docker.sandbox import DEFAULT_IMAGE
from posttrain.sandbox.environment import prepare_environment

DOCKERFILE = (f"FROM {DEFAULT_IMAGE}\nWORKDIR /app\nCOPY data.txt /app/\n"
              "RUN python3 -c \"open('/app/squares.txt', 'w').write(str([i * i for i in range(99)]))\"\n")


def _context(root: Path) -> Path:
    env = root / uuid.uuid4().hex
    env.mkdir()
    (env / "Dockerfile").write_text(DOCKERFILE)
    (env / "data.txt").write_text(uuid.uuid4().hex + "\n")   # new content: a new image
    return env


def _build_seconds(env: Path) -> tuple[float, str]:
    with open_sandbox("docker", SandboxSpec()) as sb:
        t = time.perf_counter()
        prepare_environment(env, sb)
        return time.perf_counter() - t, sb.image


def _cold_once(env: Path) -> None:
    with open_sandbox("docker", SandboxSpec()) as sb:
        prepare_environment(env, sb)
        assert sb.exec("true").exit_code == 0


def docker_rows(quick: bool, time_calls, pct) -> dict:
    """docker_* keys; {"docker": "absent: why"} when no engine answers."""
    try:
        cli = engine_cli()
    except SandboxError as e:
        return {"docker": f"absent: {e}"}
    import subprocess

    n_cold, n_warm, n_build = (8, 40, 2) if quick else (20, 200, 4)
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="posttrain-bench-docker-") as tmp:
        contexts = [_context(Path(tmp)) for _ in range(n_build)]
        uncached, images = zip(*(_build_seconds(env) for env in contexts))
        cached = [_build_seconds(env)[0] for env in contexts]
        cold = time_calls(lambda: _cold_once(contexts[0]), n_cold)
        with open_sandbox("docker", SandboxSpec()) as sb:
            prepare_environment(contexts[0], sb)
            sb.exec("true")
            warm = time_calls(lambda: sb.exec("true"), n_warm)
        subprocess.run([cli, "rmi", "-f", *images], capture_output=True)
    out["docker_cold_start_p50_ms"] = pct(cold, 0.5)
    out["docker_cold_start_p95_ms"] = pct(cold, 0.95)
    out["docker_warm_exec_p50_ms"] = pct(warm, 0.5)
    out["docker_warm_exec_p95_ms"] = pct(warm, 0.95)
    out["docker_build_uncached_s"] = sorted(uncached)[len(uncached) // 2]
    out["docker_build_cached_s"] = sorted(cached)[len(cached) // 2]
    return out
