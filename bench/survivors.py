"""Hostile survivors per backend: attacks tried, attacks that earned a reward, legitimate
servers still answering, and what the isolated verifier phase costs, beside the shared one.

    python bench/survivors.py [--quick] [--json PATH]

Each attack (posttrain/validate/survivors.py) is a process the agent leaves running that
holds a listening socket, so it is kept into the verifier phase, and then goes for the
reward. It runs against a task it cannot pass honestly; the legitimate server is a task
whose tests query the agent's HTTP server. Each backend runs them twice in one run: as
posttrain runs the verifier (`isolated`), and the way Harbor does, in the agent's sandbox
with its servers alive (`shared`, Sandbox.run_verifier's base behaviour), for contrast.
Docker and Podman rows need an engine (bash scripts/ci/docker.sh). --quick: bwrap only.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from contextlib import contextmanager

from parts.report import add_args, cpu, write_json

from posttrain.sandbox.base import Sandbox, SandboxSpec
from posttrain.sandbox.bwrap.sandbox import BwrapSandbox
from posttrain.sandbox.docker.sandbox import DockerSandbox
from posttrain.sandbox.factory import create
from posttrain.validate import survivors

CLASSES = {"bwrap": BwrapSandbox, "docker": DockerSandbox, "podman": DockerSandbox}


@contextmanager
def shared_verifier(backend: str):
    """Run the verifier the shared way (the base class's) for the duration."""
    cls = CLASSES[backend]
    cls_run = cls.run_verifier
    cls.run_verifier = Sandbox.run_verifier
    try:
        yield
    finally:
        cls.run_verifier = cls_run


def row(backend: str, mode: str) -> dict:
    with tempfile.TemporaryDirectory() as root:
        t0 = time.perf_counter()
        results = survivors.suite(root, backend)
        wall = time.perf_counter() - t0
    legit = results.pop("legit_server")
    rewarded = sorted(n for n, r in results.items() if r["reward"] > 0)
    caught = sorted(n for n, r in results.items() if r["status"] == "verifier_tampered")
    return {"attacks_tried": len(results), "attacks_rewarded": len(rewarded),
            "rewarded": rewarded, "tampering_caught": len(caught), "caught": caught,
            "legit_server_answers": legit["reward"] == 1.0, "suite_wall_s": round(wall, 2),
            "statuses": {n: r["status"] for n, r in results.items()}}


def available(backend: str) -> bool:
    try:
        with create(backend, SandboxSpec()) as sb:
            return sb.exec("true", timeout_s=60).exit_code == 0
    except Exception:
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap, "bwrap only")
    args = ap.parse_args()
    backends = ["bwrap"] if args.quick else [b for b in ("bwrap", "docker", "podman")
                                             if b == "bwrap" or available(b)]
    out = {"cpu": cpu()}
    print(f"{'backend':8s} {'mode':9s} {'tried':>5s} {'rewarded':>8s} {'caught':>6s} "
          f"{'legit server':>12s} {'wall s':>7s}")
    for backend in backends:
        for mode in ("isolated", "shared"):
            if mode == "shared":
                with shared_verifier(backend):
                    r = row(backend, mode)
            else:
                r = row(backend, mode)
            out.setdefault(backend, {})[mode] = r
            print(f"{backend:8s} {mode:9s} {r['attacks_tried']:5d} {r['attacks_rewarded']:8d} "
                  f"{r['tampering_caught']:6d} {str(r['legit_server_answers']):>12s} "
                  f"{r['suite_wall_s']:7.2f}  {', '.join(r['rewarded'])}")
            write_json(args.json, out)


if __name__ == "__main__":
    main()
