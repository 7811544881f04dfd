"""What `posttrain rl` needs to run beyond one process: the executor, chosen once here from
`cluster.executor` (local threads, or Ray actors; the layers below never ask which), the
trainer (one process, or FSDP2 ranks as Ray actors), and preemption: SIGTERM lets the step
in progress finish, checkpoints and stops (exit 0)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

from posttrain.errors import PosttrainError
from posttrain.recipes.rl.config import RLRunConfig
from posttrain.rollout.executors.base import LocalExecutor
from posttrain.train.trainer import PolicyTrainer


def make_executor(cfg: RLRunConfig, run_dir: Path):
    """The one place the executor is chosen (`cluster.executor`); the layers never ask."""
    if cfg.cluster.executor == "local":
        return LocalExecutor()
    try:
        import ray  # noqa: F401
    except ImportError as e:
        raise PosttrainError(f"cluster.executor = \"ray\" needs Ray: pip install -c constraints.txt -e '.[ray]' ({e})") from e
    from posttrain.rollout.executors.ray_executor import RayExecutor

    return RayExecutor(cfg.cluster, run_dir / "actors")


def make_trainer(cfg: RLRunConfig, model, pad_id: int, run_dir: Path):
    """One PolicyTrainer in this process, or `cluster.trainer_ranks` FSDP2 ranks on Ray; each
    runs cfg.optim as validated (rl_config.py resolves its derived values)."""
    c = cfg.cluster
    if c.trainer_ranks == 1:
        return PolicyTrainer(model, pad_id, cfg.optim, reference=cfg.algo.kl_coef > 0)
    if c.executor != "ray":
        raise PosttrainError("cluster.trainer_ranks > 1 runs the ranks as Ray actors: "
                             "set cluster.executor = \"ray\"")
    from posttrain.train.ranks import RankedTrainer

    return RankedTrainer(model, pad_id, cfg.optim, c.trainer_ranks,
                         c.trainer_cpus, c.trainer_resources, run_dir / "actors", c.start_timeout_s)


class Preempted:
    """SIGTERM sets `asked`; the run checkpoints after the step in progress and stops."""

    def __init__(self):
        self.asked = False

    def __enter__(self):
        self._old = None
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGTERM, self._ask)
        return self

    def _ask(self, signum, frame) -> None:
        self.asked = True

    def __exit__(self, *exc) -> None:
        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)


class Stop(Exception):
    """Raised from on_step to end the pipeline's loop after a preemption checkpoint."""
