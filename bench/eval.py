"""Eval harness throughput: trials per minute at --jobs 1, 4 and 16 on the built-in suite.

    python bench/eval.py [--quick] [--json PATH]

Two set-ups, each through the real `posttrain eval` code path (sandboxes, verifier, job
directory writes) with one engine or endpoint shared by all trials:
  tools  the tool-calling agent against a scripted OpenAI-compatible server on loopback
         that plays each task's oracle (tests/evals/scripted_server.py): measures the
         harness and sandbox cost per trial, the model costs ~nothing;
  text   the embedded engine with a tiny untrained checkpoint built in-process, text
         protocol, 6 turns x 40 tokens per trial: measures batched local generation.
Full run: ~20 unique tasks, k=4 (tools) and k=2 (text); --quick: 8 tasks, k=2 and k=1.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "evals"))

from parts.report import add_args, write_json  # noqa: E402
from scripted_server import Script, oracle_map, serve  # noqa: E402

from posttrain.evals.launch import EvalRequest, evaluate  # noqa: E402
from posttrain.models.tiny import build_tiny_model, build_tokenizer, save_policy  # noqa: E402
from posttrain.tasks.suites import terminal_basics  # noqa: E402


def tiny_checkpoint(root: Path) -> Path:
    corpus = ["<bash>cat /app/data.txt</bash>", "<submit/>", "wc -l /app/notes.txt"] * 50
    tok = build_tokenizer(corpus, vocab_size=400)
    return save_policy(build_tiny_model(len(tok), seed=0), tok, root / "tiny-ckpt")


def one_run(req: EvalRequest) -> dict:
    t0 = time.perf_counter()
    _, s = evaluate(req)
    wall = time.perf_counter() - t0
    return {"jobs": req.jobs, "trials": s["n_trials"], "wall_s": round(wall, 2),
            "trials_per_min": round(60 * s["n_trials"] / wall, 1),
            "passed": s["counts"]["passed"], "mean_s_per_trial": s["latency"]["mean_per_trial"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap, "8 tasks x k=2 instead of 20 x 4")
    ap.add_argument("--jobs", default="1,4,16")
    args = ap.parse_args()
    n_tasks, k = (8, 2) if args.quick else (20, 4)
    levels = [int(x) for x in args.jobs.split(",")]
    root = Path(tempfile.mkdtemp(prefix="bench-eval-"))
    tasks_dir = root / "tasks"
    terminal_basics.generate(tasks_dir, n_tasks, seed=1, split="heldout")
    oracle = oracle_map(tasks_dir)  # drops tasks whose instruction repeats
    n_tasks = len(oracle)
    ckpt = tiny_checkpoint(root)
    text_k = 1 if args.quick else 2  # the text set-up costs ~6 s of CPU per trial
    results = {"n_tasks": n_tasks, "k": k, "text_k": text_k, "tools": [], "text": []}
    with serve(Script(oracle)) as url:
        for n in levels:
            results["tools"].append(one_run(EvalRequest(
                str(tasks_dir), "scripted", k, n, base_url=url, job=f"tools-{n}",
                jobs_dir=str(root / "jobs"))))
    for n in levels:
        results["text"].append(one_run(EvalRequest(
            str(tasks_dir), str(ckpt), text_k, n, job=f"text-{n}", jobs_dir=str(root / "jobs"),
            settings={"max_turns": 6, "max_reply_tokens": 40})))
    print(f"{'setup':<6} {'--jobs':>6} {'trials':>6} {'wall s':>8} {'trials/min':>10}")
    for setup in ("tools", "text"):
        for r in results[setup]:
            print(f"{setup:<6} {r['jobs']:>6} {r['trials']:>6} {r['wall_s']:>8} "
                  f"{r['trials_per_min']:>10}")
    write_json(args.json, results)


if __name__ == "__main__":
    main()
