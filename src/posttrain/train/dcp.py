"""Sharded checkpoints (torch Distributed Checkpoint): each rank writes its own shards, and
a checkpoint written by N ranks loads on M, M = 1 included (a plain model, no process group)."""

from __future__ import annotations


def save_sharded(model, optimizer, path) -> None:
    """Model and optimizer state as a Distributed Checkpoint: each rank writes its shards."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(path))


def load_sharded(model, optimizer, path) -> None:
    """Load a Distributed Checkpoint written on any rank count into this rank's shards (or
    into a plain model and optimizer outside a process group)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict, get_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=str(path))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
