"""Experiment trackers beside metrics.jsonl: W&B, MLflow and trackio, one adapter module each,
chosen by `tracking.backends` in `fanout.py`."""
