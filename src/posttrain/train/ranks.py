"""Trainer ranks as Ray actors in one placement group, driven like one PolicyTrainer.

`RankedTrainer(model, pad_id, optim, ranks)` starts `ranks` actors (PACK placement group,
one bundle each), joins them in a gloo (CPU) or NCCL (GPU) process group and shards the model
over them with FSDP2 (train/fsdp.py). `rl_step` hands the whole batch to every rank, returns
the batch's stats and copies the new weights into `model` (the driver's copy, which the
pipeline publishes to engines and the checkpoint saves). `save_state`/`load_state` write
and read a Distributed Checkpoint, each rank its own shards (the path must be shared by all
nodes). A rank that dies stops the step with `TrainerRankLost`, naming the rank, its node and
its last log lines; the run then resumes from its last checkpoint.
"""

from __future__ import annotations

import datetime
import os
import socket
import uuid
from pathlib import Path

from posttrain.errors import PosttrainError


class TrainerRankLost(PosttrainError):
    """A trainer rank died mid-step; the step is lost, resume from the last checkpoint."""


def rank_backend(cuda: bool) -> tuple[str, str]:
    """(process-group backend, device) of a rank: NCCL with its model on the rank's GPU where
    torch sees CUDA, else gloo on the CPU. One GPU runs one rank (make_trainer: trainer_ranks = 1)."""
    return ("nccl", "cuda") if cuda else ("gloo", "cpu")


class TrainerRank:
    """Actor body: one FSDP2 rank."""

    def __init__(self, rank: int, world: int, init_method: str, model, pad_id: int, optim, log_path):
        import torch
        import torch.distributed as dist

        from posttrain.train.fsdp import ShardedTrainer

        torch.set_num_threads(1)
        self.rank, self.log_path = rank, log_path
        backend, device = rank_backend(torch.cuda.is_available())
        if device == "cuda":  # Ray shows each rank its own GPUs; else the ranks of a node share them
            device = f"cuda:{rank % torch.cuda.device_count()}"
            torch.cuda.set_device(device)
        dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=120))
        self.trainer = ShardedTrainer(model, pad_id, optim, device=device)
        self._log(f"rank {rank}/{world} up on pid {os.getpid()} ({backend})")

    def _log(self, line: str) -> None:
        if self.log_path:
            Path(self.log_path).parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "a") as f:
                f.write(line + "\n")

    def where(self) -> dict:
        import ray

        return {"node": ray.get_runtime_context().get_node_id(), "ip": ray.util.get_node_ip_address(),
                "pid": os.getpid()}

    def rl_step(self, episodes, cfg) -> tuple[dict, dict | None]:
        stats = self.trainer.rl_step(episodes, cfg)
        full = self.trainer.full_state()
        self._log(f"step: loss {stats.get('loss', float('nan')):.6f}")
        return stats, full if self.rank == 0 else None

    def full(self) -> dict | None:
        full = self.trainer.full_state()
        return full if self.rank == 0 else None

    def save(self, path: str) -> None:
        from posttrain.train.dcp import save_sharded

        save_sharded(self.trainer.model, self.trainer.optimizer, path)

    def load(self, path: str) -> None:
        from posttrain.train.dcp import load_sharded

        load_sharded(self.trainer.model, self.trainer.optimizer, path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _on_host(model):
    """What the ranks are sent: the model itself on a CPU, else a CPU copy (each rank puts it on
    its own device; a GPU tensor would not unpickle on a rank without that GPU)."""
    import copy

    if next(model.parameters()).device.type == "cpu":
        return model
    return copy.deepcopy(model).to("cpu")


class RankedTrainer:
    def __init__(self, model, pad_id: int, optim, ranks: int, cpus: float = 0.5,
                 resources: dict | None = None, log_dir: Path | None = None, timeout_s: float = 60.0):
        import ray

        from posttrain.cluster.ray_cluster import bundle, placement
        from posttrain.train.fsdp import check_shards

        check_shards(model, ranks)
        self.model, self.ranks, self.log_dir = model, ranks, log_dir
        b = bundle(cpus, resources or {})
        self._pg = placement([b] * ranks, f"{ranks} trainer ranks", timeout_s)
        ip = ray.util.get_node_ip_address()
        init = f"tcp://{ip}:{_free_port()}"
        cls = ray.remote(TrainerRank)
        run_id = uuid.uuid4().hex[:8]
        self.actors = []
        try:
            self._start(cls, run_id, b, ranks, init, _on_host(model), pad_id, optim, timeout_s)
        except BaseException:
            self.close()  # a rank lost while starting: free its placement group for the resume
            raise

    def _start(self, cls, run_id, b, ranks, init, model, pad_id, optim, timeout_s) -> None:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self.actors = [
            cls.options(name=f"posttrain-{run_id}-trainer-{i}", num_cpus=b["CPU"],
                        resources={k: v for k, v in b.items() if k != "CPU"},
                        scheduling_strategy=PlacementGroupSchedulingStrategy(self._pg, i)).remote(
                i, ranks, init, model, pad_id, optim, self._log_path(i))
            for i in range(ranks)]
        self.where = self._all(lambda a: a.where.remote(), timeout_s)

    def _log_path(self, rank: int) -> str | None:
        return str(self.log_dir / f"trainer-{rank}.log") if self.log_dir else None

    def _all(self, call, timeout_s: float | None = None) -> list:
        """Call every rank and wait for all; the first that fails (the others may then wait in
        a collective forever) is a TrainerRankLost naming it."""
        import ray

        refs = [call(a) for a in self.actors]
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=timeout_s)
            if not ready:
                self._lost(refs.index(pending[0]), TimeoutError(f"no answer within {timeout_s} s"))
            try:
                ray.get(ready[0])
            except Exception as e:
                self._lost(refs.index(ready[0]), e)
        return ray.get(refs)

    def _lost(self, rank: int, e: BaseException):
        node = (getattr(self, "where", None) or [{}] * self.ranks)[rank]
        tail = ""
        if (p := self._log_path(rank)) and Path(p).is_file():
            tail = "".join(Path(p).read_text().splitlines(keepends=True)[-10:])
        raise TrainerRankLost(f"trainer rank {rank} (node {node.get('ip', '?')}, pid {node.get('pid', '?')}) "
                              f"failed: {type(e).__name__}: {str(e)[:300]}\n"
                              f"last log lines:\n{tail or '(no log)'}") from e

    def rl_step(self, episodes, cfg) -> dict:
        results = self._all(lambda a: a.rl_step.remote(episodes, cfg))
        stats, full = results[0]
        self.model.load_state_dict(full, strict=False)
        return stats

    def save_state(self, checkpoint: Path) -> None:
        """Each rank writes its shards under checkpoint/dcp (DCP)."""
        dcp = (checkpoint / "dcp").resolve()
        self._all(lambda a: a.save.remote(str(dcp)))

    def load_state(self, checkpoint: Path) -> None:
        """Shards saved by any number of ranks load on these (train/dcp.py)."""
        dcp = (checkpoint / "dcp").resolve()
        if not dcp.is_dir():
            raise PosttrainError(f"{checkpoint} was saved by one trainer (trainer.pt); "
                                 "trainer ranks resume from sharded checkpoints only")
        self._all(lambda a: a.load.remote(str(dcp)))
        self.model.load_state_dict(self._all(lambda a: a.full.remote())[0], strict=False)

    def close(self) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        for a in self.actors:
            try:
                ray.kill(a, no_restart=True)
            except Exception:
                pass
        try:
            remove_placement_group(self._pg)
        except Exception:
            pass
