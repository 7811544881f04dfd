"""Gateway benchmark: overhead beside LiteLLM's proxy, a backend killed under load, token limits
under 200 concurrent streams with the audit chain checked, and the fast variants against the
standard one. One run, side by side.

    flock /tmp/posttrain-bench.lock python bench/gateway.py [--quick] [--json PATH] [--skip-engine] [--nice N]

The load generator needs aiohttp: pip install -c constraints.txt -e '.[gateway-bench]'.
LiteLLM (the baseline) is installed for the benchmark only, in .venv-litellm, by
bench/parts/litellm_setup.sh, which this script calls. Servers are separate processes on loopback;
the load generator (bench/parts/gateway_load.py) is one more, so nothing shares an event loop; the
overhead section's method (open loop, pinned cores, rounds) is in bench/parts/gateway_overhead.py.
SmolLM2-135M-Instruct (posttrain models import) is used for the variant section if present.
"""

from __future__ import annotations

import argparse
import os

from parts.gateway_overhead import bench_overhead
from parts.gateway_sections import bench_kill, bench_limits, print_table
from parts.gateway_variants import bench_variants
from parts.report import add_args, write_json


def set_nice(nice: int) -> int:
    """On a shared machine other work (tests, builds: nice 15) would delay every wake-up of the
    processes under test by a time slice; a negative niceness, the same for every target and
    inherited by every process started, keeps that queueing out of what is measured."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except PermissionError:
        pass
    return os.getpriority(os.PRIO_PROCESS, 0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_args(p, "fewer requests per row")
    p.add_argument("--skip-engine", action="store_true", help="Leave out the posttrain serve variants.")
    p.add_argument("--skip-litellm", action="store_true")
    p.add_argument("--nice", type=int, default=-10,
                   help="Niceness of this run and every server and client it starts (root may go below 0).")
    a = p.parse_args()
    out: dict = {"quick": a.quick, "loadavg_at_start": os.getloadavg(), "nice": set_nice(a.nice)}
    sections = [("overhead", lambda: bench_overhead(a.quick, with_litellm=not a.skip_litellm)),
                ("backend_kill", lambda: bench_kill(a.quick)), ("limits", lambda: bench_limits(a.quick))]
    if not a.skip_engine:
        sections.append(("variants", lambda: bench_variants(a.quick)))
    for name, run in sections:
        try:
            out.update(run())
        except Exception as e:  # noqa: BLE001 - one failed section must not lose the others' numbers
            out[f"{name}_error"] = f"{type(e).__name__}: {e}"
            print(f"[{name}] failed: {out[f'{name}_error']}", flush=True)
        write_json(a.json, out)
    out["loadavg_at_end"] = os.getloadavg()
    print_table(out)
    write_json(a.json, out)


if __name__ == "__main__":
    main()
