"""Long-horizon agents that recover (issue 33): kill-and-resume, fault injection, context policies.

    python bench/agent_runtime.py [--quick] [--json PATH] [--only resume|faults|context]
        [--backends bwrap,docker]

Kill-and-resume, per sandbox backend: `posttrain eval` of terminal-basics tasks (k=2) with a
warm tiny policy served by a real `posttrain serve` (text protocol, token ids over HTTP) runs
through once; then the same eval is SIGKILLed at random points and run again after each kill.
Keys per backend: `resume_equal` (every trial's status and reward as in the whole run),
`turns_redone` (sequences the server generated beyond the whole run's; the bound is one per
episode in flight per kill), `snapshot_ms_p50`, `restore_ms_p50`.
Fault injection, per backend: the server SIGKILLed (and started again) and a running sandbox's
backend SIGKILLed (its bwrap, or its container) during an eval; `faults_misrecorded` counts the
trials scored without an error whose outcome differs from the whole run's (must be 0).
Context policies: each policy at each context budget on the longctx, terminal-tools and
terminal-basics suites (24 tasks of the last, so that pass rates compare), warm tiny policy and
SmolLM2-135M-Instruct: pass rate, prompt tokens per episode, overflows.
The tasks' `FROM ubuntu:24.04` is built from the local Debian base image (this machine pulls
nothing): POSTTRAIN_DOCKER_BASE_MAP, unless set, maps it to posttrain/bookworm:latest.
Headline, chosen before the run: resume_equal, turns_redone against its bound and
faults_misrecorded for bwrap and docker.
"""

from __future__ import annotations

import argparse
import os
import random
from pathlib import Path

from parts.agent_rt_context import context_policies
from parts.agent_rt_faults import fault_injection
from parts.agent_rt_resume import kill_and_resume
from parts.agent_rt_setup import Server, make_tasks, warm_policy
from parts.report import add_args, cpu, write_json

SIZES = {"quick": dict(tasks=6, k=2, jobs=4, max_turns=4, kills=2, faults=2,
                       sft=150, ctx_tasks=2, ctx_many_tasks=4, budgets=[256, 512], ctx_turns=4, ctx_reply_tokens=32),
         "full": dict(tasks=20, k=2, jobs=8, max_turns=4, kills=5, faults=5,
                      sft=300, ctx_tasks=3, ctx_many_tasks=24, budgets=[256, 384, 512], ctx_turns=6, ctx_reply_tokens=32)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(parser)
    parser.add_argument("--only", choices=["resume", "faults", "context"], action="append")
    parser.add_argument("--backends", default="bwrap,docker")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-agent-runtime"))
    args = parser.parse_args()
    size = SIZES["quick" if args.quick else "full"]
    only = set(args.only or ["resume", "faults", "context"])
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    result = {"cpu": cpu(), "settings": size | {"quick": args.quick}}
    tasks, ckpt = make_tasks(out, size["tasks"], seed=11), warm_policy(out, size["sft"])
    rng = random.Random(0)
    os.environ.setdefault("POSTTRAIN_DOCKER_BASE_MAP", "ubuntu:24.04=posttrain/bookworm:latest")
    result["settings"]["docker_base_map"] = os.environ["POSTTRAIN_DOCKER_BASE_MAP"]
    if only & {"resume", "faults"}:
        server = Server(ckpt, out / "serve.log")
        server.start()
        try:
            for backend in args.backends.split(","):
                if "resume" in only:
                    result[f"resume_{backend}"] = kill_and_resume(server, tasks, ckpt, out, backend, size, rng)
                    write_json(args.json, result)
                if "faults" in only:
                    whole = result[f"resume_{backend}"]["sequences_whole"]
                    result[f"faults_{backend}"] = fault_injection(server, tasks, ckpt, out, backend, size, rng, whole)
                    write_json(args.json, result)
        finally:
            server.kill()
    if "context" in only:
        from posttrain.models.gguf import ensure_model

        models = {"tiny-warm": ckpt, "smollm2-135m": ensure_model("smollm2-135m-instruct")}
        result["context"] = context_policies(models, out, size, progress=lambda r: print(r, flush=True))
        write_json(args.json, result)
    result["loadavg_end"] = os.getloadavg()    # helpers' tests may share these cores
    write_json(args.json, result)
    _print(result)


def _print(result: dict) -> None:
    keys = ["resume_equal", "turns_redone", "turns_redone_bound", "snapshot_ms_p50", "restore_ms_p50",
            "faults_misrecorded", "engine_kills", "sandbox_kills", "errors"]
    for name, section in result.items():
        if isinstance(section, dict) and name.startswith(("resume_", "faults_")):
            print(f"{name:16} " + "  ".join(f"{k}={section[k]}" for k in keys if k in section))
    for row in result.get("context", []):
        print(f"{row['model']:13} {row['suite']:15} {row['budget']:5} {row['policy']:40} "
              f"pass={row['pass_rate']:.3f} prompt_tokens={row['prompt_tokens_per_episode']:8.1f} "
              f"overflow={row['context_overflow']}")


if __name__ == "__main__":
    main()
