"""What a multi-container task costs: a compose sandbox (main + one HTTP sidecar, images
cached) next to a single-container docker sandbox of the same main image, in one run.

    python bench/compose.py [--quick] [--json PATH]

Needs a Docker engine and docker-compose (`bash scripts/ci/docker.sh`); no extra Python
dependency. Samples alternate between the two kinds, so both see the same machine load.
  start   open + prepare_environment + the first exec (sidecar healthy; for compose the
          exec fetches from the sidecar) ; close   close(), everything removed
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from parts.report import add_args, cpu, write_json

from posttrain.sandbox import SandboxSpec, open_sandbox
from posttrain.sandbox.docker.sandbox import DEFAULT_IMAGE
from posttrain.sandbox.environment import prepare_environment

COMPOSE = f"""services:
  api:
    image: {DEFAULT_IMAGE}
    command: ["python3", "-m", "http.server", "8080", "--directory", "/etc"]
    healthcheck:
      test: ["CMD", "python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/hostname')"]
      interval: 1s
      retries: 60
"""
FETCH = "python3 -c \"import urllib.request; urllib.request.urlopen('http://api:8080/hostname')\""


def _env(root: Path, compose: bool) -> Path:
    env = root / ("compose" if compose else "single")
    env.mkdir()
    (env / "Dockerfile").write_text(f"FROM {DEFAULT_IMAGE}\nWORKDIR /app\nRUN echo x > /app/x\n")
    if compose:
        (env / "docker-compose.yaml").write_text(COMPOSE)
    return env


def _once(env: Path, compose: bool) -> tuple[float, float]:
    t0 = time.perf_counter()
    sb = open_sandbox("docker", SandboxSpec())
    prepare_environment(env, sb)
    assert sb.exec(FETCH if compose else "true", timeout_s=120).exit_code == 0
    t1 = time.perf_counter()
    sb.close()
    return (t1 - t0) * 1000, (time.perf_counter() - t1) * 1000


def _p50(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def run(quick: bool) -> dict:
    n = 3 if quick else 10
    with tempfile.TemporaryDirectory(prefix="posttrain-bench-compose-") as tmp:
        envs = {kind: _env(Path(tmp), kind == "compose") for kind in ("single", "compose")}
        for kind, env in envs.items():            # builds and first starts, not timed
            _once(env, kind == "compose")
        got = {kind: {"start": [], "close": []} for kind in envs}
        for _ in range(n):
            for kind, env in envs.items():
                start, close = _once(env, kind == "compose")
                got[kind]["start"].append(start)
                got[kind]["close"].append(close)
    out = {f"{kind}_{what}_p50_ms": _p50(xs) for kind, d in got.items() for what, xs in d.items()}
    out["compose_start_over_single"] = out["compose_start_p50_ms"] / out["single_start_p50_ms"]
    out["compose_close_over_single"] = out["compose_close_p50_ms"] / out["single_close_p50_ms"]
    out["machine"] = {"cpus": os.cpu_count(), "loadavg_1m_at_end": os.getloadavg()[0],
                      "kernel": platform.release(), "quick": quick, "samples": n}
    out["cpu"] = cpu()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap, "3 samples of each (about a minute)")
    args = ap.parse_args()
    out = run(args.quick)
    for key, value in out.items():
        if key not in ("machine", "cpu"):
            print(f"{key:28s} {value:10.2f}")
    print(f"machine: {out['machine']}\ncpu: {out['cpu'].get('model', out['cpu'])}")
    write_json(args.json, out)


if __name__ == "__main__":
    main()
