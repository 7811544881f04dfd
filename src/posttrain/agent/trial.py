"""One task in one sandbox: start it from the task's environment, run the oracle, verify.

Tests are bound in at /tests only for the verifier command, after the agent phase. The
sandbox runs the verifier where what the agent left running cannot reach its result
(Sandbox.run_verifier); a result touched from outside is `verifier_tampered`, never a
reward. Servers the agent or the oracle left running stay for the tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from posttrain.errors import VerifierError
from posttrain.sandbox import Sandbox, SandboxSpec, open_sandbox
from posttrain.sandbox.environment import prepare_environment
from posttrain.tasks import Task
from posttrain.tasks.reward import parse_reward
from posttrain.types import ExecResult

VERIFY_CMD = "bash /tests/test.sh"


@dataclass
class Verdict:
    reward: float
    status: str  # ok | verifier_timeout | verifier_error | verifier_tampered
    details: dict[str, float] = field(default_factory=dict)
    error: str = ""
    result: ExecResult | None = None


def sandbox_spec(task: Task) -> SandboxSpec:
    env = task.config.environment
    hide = task.config.metadata.get("sandbox_hide") or ()
    return SandboxSpec(network=task.config.network_mode, memory_mb=env.memory_mb,
                       cpus=float(env.cpus), env=dict(env.env), workdir=env.workdir,
                       user=task.config.agent.user, verifier_user=task.config.verifier.user,
                       build_timeout_s=float(env.build_timeout_sec),
                       hidden=tuple(hide) if isinstance(hide, (list, tuple)) else (str(hide),))


def open_task_sandbox(task: Task, backend: str = "bwrap") -> Sandbox:
    """A fresh sandbox with the task's environment applied; closed again if setup fails."""
    sandbox = open_sandbox(backend, sandbox_spec(task))
    try:
        prepare_environment(task.environment_dir, sandbox)
    except BaseException:
        sandbox.close()
        raise
    return sandbox


def run_oracle(task: Task, sandbox: Sandbox) -> ExecResult:
    return sandbox.exec("bash /solution/solve.sh", timeout_s=float(task.config.agent.timeout_sec),
                        env=dict(task.config.solution.env), mounts={"/solution": task.solution_dir})


def verify(task: Task, sandbox: Sandbox) -> Verdict:
    """Run tests/test.sh and read the reward; a missing or bad reward is an error, not a 0,
    and a result another process touched is `verifier_tampered` with reward 0."""
    run = sandbox.run_verifier(VERIFY_CMD, timeout_s=float(task.config.verifier.timeout_sec),
                               env=dict(task.config.verifier.env), tests=task.tests_dir)
    if run.tampered:
        return Verdict(0.0, "verifier_tampered", error=run.tampered, result=run.result)
    if run.result.timed_out:
        return Verdict(0.0, "verifier_timeout", error="verifier timed out", result=run.result)
    try:
        reward, details = parse_reward(run.output, task.config.verifier.reward_range)
    except VerifierError as e:
        return Verdict(0.0, "verifier_error", error=str(e), result=run.result)
    return Verdict(reward, "ok", details, result=run.result)
