"""An evaluation job and training work in one process share a PriorityPool of sandbox
slots: training preempts evaluation trials (their real bwrap sandboxes are closed), and
the evaluation still records every trial exactly once, each scored by its verifier."""

import threading
import time

from posttrain.agent.harness.chatclient import ChatClient
from posttrain.evals.jobdir import JobDir
from posttrain.evals.launch import EvalRequest, build_conditions, read_tasks
from posttrain.evals.runner import ToolExecutor, run_job
from posttrain.evals.trials import TaskSandboxes
from posttrain.sandbox.base import SandboxSpec
from posttrain.sandbox.pool import SandboxPool
from posttrain.schedule.pool import PriorityPool
from scripted_server import Script, serve


def training(shared: PriorityPool, ran: list) -> None:
    """Rollout-like work: three sandboxes, each running a command, at training priority."""
    with SandboxPool(SandboxSpec(), "bwrap", shared=shared, kind="train") as pool:
        time.sleep(0.4)
        for _ in range(3):
            sb = pool.acquire("rl")
            ran.append(sb.exec("sleep 0.2; echo rollout").stdout.strip())
            pool.release(sb)


def test_training_preempts_an_evaluation_that_records_every_trial_once(tmp_path, task_dir, oracle):
    shared = PriorityPool(slots=2, priorities={"train": 10, "eval": 0})
    with serve(Script(oracle, delay_s=0.15)) as url:
        req = EvalRequest(str(task_dir), "scripted", k=2, jobs=2, base_url=url, job="shared",
                          jobs_dir=str(tmp_path / "jobs"))
        tasks = read_tasks(req.tasks_dir)
        c = build_conditions(req, tasks)
        client = ChatClient(url, "scripted")
        job = JobDir(tmp_path / "jobs" / "shared").open(c)
        sandboxes = TaskSandboxes(tasks, "bwrap", warm=0, shared=shared)
        ran: list[str] = []
        trainer = threading.Thread(target=training, args=(shared, ran))
        trainer.start()
        try:
            summary = run_job(job, tasks, c, ToolExecutor(client, c, sandboxes, 2))
        finally:
            trainer.join(60)
            job.close()
            sandboxes.close()
            client.close()
    records = job.records()
    keys = sorted((r.task_name, r.attempt) for r in records)
    assert keys == sorted({(t.id, a) for t in tasks for a in range(2)})   # each once, none lost
    assert summary["counts"]["passed"] == 8 and all(r.status == "passed" for r in records)
    assert ran == ["rollout"] * 3
    assert shared.stats["preempted_eval"] >= 1
    assert shared.in_use() == 0
