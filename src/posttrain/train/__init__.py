"""The trainer: losses, advantages, the packed RL forward, SFT/RL optimizer steps, checkpoints, FSDP2 ranks."""
