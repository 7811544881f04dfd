"""Kill-and-resume: one eval run through, then the same eval SIGKILLed at random points and run
again after each kill; the final outcomes compared trial by trial, and the turns redone counted
at the server (sequences it generated beyond the uninterrupted run's)."""

from __future__ import annotations

import random
import time
from pathlib import Path

from parts.agent_rt_setup import (checkpoint_ms, eval_argv, kill_group, outcomes, p50, run_eval,
                                  start_eval, trials)


def _kill_once(server, argv, log: Path, job: Path, after: int) -> dict | None:
    """Start the eval, SIGKILL it once the server has been asked for `after` more sequences;
    None if it finished first."""
    before = server.sequences()
    proc = start_eval(argv, log)
    while proc.poll() is None and server.sequences() - before < after:
        time.sleep(0.01)
    if proc.poll() is not None:
        return None
    kill_group(proc)
    episodes = job / ".episodes"
    held = sorted(p.name for p in episodes.iterdir()) if episodes.is_dir() else []
    return {"after_sequences": after, "finished": len(trials(job)), "checkpoints_held": len(held)}


def kill_and_resume(server, tasks: Path, ckpt: Path, out: Path, backend: str, size: dict,
                    rng: random.Random) -> dict:
    k, jobs, turns = size["k"], size["jobs"], size["max_turns"]
    log = out / f"eval-{backend}.log"
    n_trials = len(list(tasks.iterdir())) * k
    s0 = server.sequences()
    base_wall = run_eval(eval_argv(tasks, ckpt, server.url, out / "jobs", f"{backend}-whole", backend,
                                   k, jobs, turns), log)
    base_seqs = server.sequences() - s0
    argv = eval_argv(tasks, ckpt, server.url, out / "jobs", f"{backend}-killed", backend, k, jobs, turns)
    job = out / "jobs" / f"{backend}-killed"
    kills, s1 = [], server.sequences()
    # the kill points: distinct counts of sequences into the killed runs, redone ones included,
    # all before 80% of the whole run's, so each lands before the job can finish
    points = sorted(rng.sample(range(1, max(size["kills"] + 1, int(0.8 * base_seqs))), size["kills"]))
    for point in points:
        kill = _kill_once(server, argv, log, job, max(1, point - (server.sequences() - s1)))
        if kill is not None:
            kill["in_flight"] = min(jobs, n_trials - kill["finished"])
            kills.append(kill)
    run_eval(argv, log)
    killed_seqs = server.sequences() - s1
    whole, resumed = outcomes(out / "jobs" / f"{backend}-whole"), outcomes(job)
    differ = sorted(name for name in whole if whole[name] != resumed.get(name))
    ms = checkpoint_ms(job)
    redone = killed_seqs - base_seqs
    return {"trials": n_trials, "resume_equal": not differ and len(resumed) == n_trials,
            "trials_differing": differ, "turns_redone": redone,
            "turns_redone_bound": sum(x["in_flight"] for x in kills), "kills": kills,
            "sequences_whole": base_seqs, "sequences_killed": killed_seqs,
            "passed_whole": sum(1 for s, _ in whole.values() if s == "passed"),
            "snapshot_ms_p50": p50(ms["snapshot"]), "restore_ms_p50": p50(ms["restore"]),
            "snapshots": len(ms["snapshot"]), "restores": len(ms["restore"]),
            "whole_wall_s": round(base_wall, 1)}
