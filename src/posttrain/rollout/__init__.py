"""Asynchronous RL rollouts: two loops around a buffer (see docs/rl.md).

envs.py runs groups of episodes; buffer.py holds finished groups with their versions;
pipeline.py drives the rollout loop and the training loop, synchronously
(max_staleness 0) or in two threads.
"""
