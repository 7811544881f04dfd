"""`posttrain sandbox run`: one command in a fresh sandbox, printing what happened.

    posttrain sandbox run -- bash -c 'id; ls /'
    posttrain sandbox run --memory-mb 256 --pids 64 --timeout 5 --json -- python3 -c 'print(1)'
    posttrain sandbox run --task tasks/hello -- ls -la /app
    posttrain sandbox prune [--older-than-days 7] [--all] [--backend podman]   (containers, images)
For debugging tasks and for checking the isolation by hand; the exit status is the
command's. `--json` prints the ExecResult plus how each limit was enforced.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import List, Optional

import typer

from posttrain.commands.checks import positive

sandbox_app = typer.Typer(no_args_is_help=True, help="Run commands in a sandbox by hand.")


def _spec(task: Optional[Path], memory_mb, pids, network, cpus):
    from posttrain.sandbox import SandboxSpec

    spec = SandboxSpec()
    if task is not None:
        from posttrain.tasks.task import read_task

        config = read_task(task).config
        env = config.environment
        spec = SandboxSpec(network=config.network_mode, memory_mb=env.memory_mb,
                           cpus=float(env.cpus), disk_mb=env.storage_mb, env=dict(env.env),
                           workdir=env.workdir)
    spec.memory_mb = memory_mb or spec.memory_mb
    spec.pids = pids or spec.pids
    spec.cpus = cpus or spec.cpus
    spec.network = network or spec.network
    return spec


@sandbox_app.command("run", context_settings={"allow_interspersed_args": False})
def run(
    command: List[str] = typer.Argument(..., help="The command and its arguments (after --)."),
    memory_mb: Optional[int] = typer.Option(None, "--memory-mb", min=1, help="Memory limit (MB)."),
    pids: Optional[int] = typer.Option(None, "--pids", min=1, help="Process limit."),
    cpus: Optional[float] = typer.Option(None, "--cpus", callback=positive, help="CPU share (e.g. 0.5)."),
    timeout: float = typer.Option(60.0, "--timeout", callback=positive, help="Wall-clock seconds."),
    network: Optional[str] = typer.Option(None, "--network", help="no-network | public."),
    task: Optional[Path] = typer.Option(None, "--task", help="Task dir: its limits and environment/."),
    backend: str = typer.Option("bwrap", "--backend", help="bwrap | docker | podman | process."),
    as_json: bool = typer.Option(False, "--json", help="Print the ExecResult as JSON."),
) -> None:
    """Run COMMAND in a fresh sandbox, print its output (or JSON), exit with its status."""
    from posttrain.sandbox import open_sandbox
    from posttrain.sandbox.environment import prepare_environment

    spec = _spec(task, memory_mb, pids, network, cpus)
    with open_sandbox(backend, spec) as sb:
        if task is not None:
            prepare_environment(task / "environment", sb)
        result = sb.exec(shlex.join(command), timeout_s=timeout)
        enforcement = getattr(sb, "enforcement", {})
    if as_json:
        print(json.dumps({**result.to_dict(), "backend": backend, "enforcement": enforcement},
                         indent=2))
    else:
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        sys.stderr.write(f"[exit {result.exit_code} in {result.duration_s:.3f}s, killed_by="
                         f"{result.killed_by}, truncated={result.truncated}]\n")
    sys.exit(result.exit_code)       # click (standalone_mode=False) would swallow typer.Exit


@sandbox_app.command("reap")
def reap_sandboxes() -> None:
    """Reclaim sandboxes whose owner died (killed runs): processes, cgroups, tmpfs, files."""
    from posttrain.sandbox.reaper import reap

    r = reap()
    print(f"reclaimed {len(r.sandboxes)} sandboxes, killed {r.processes_killed} processes, "
          f"removed {r.cgroups_removed} cgroups")


@sandbox_app.command("prune")
def prune(
    older_than_days: float = typer.Option(7.0, help="Remove cached task images older than this."),
    all_images: bool = typer.Option(False, "--all", help="Remove every cached task image."),
    backend: str = typer.Option("docker", "--backend", help="docker | podman: whose engine."),
) -> None:
    """Docker backend cleanup: containers (and compose networks, volumes) whose owner died,
    and old cached task images."""
    from posttrain.sandbox.docker.cleanup import prune as prune_docker

    removed = prune_docker(older_than_days, all_images, backend)
    print("removed " + ", ".join(f"{len(v)} {kind}" for kind, v in removed.items()))


def register(app: typer.Typer) -> None:
    app.add_typer(sandbox_app, name="sandbox")
