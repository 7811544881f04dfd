"""Where the rollout loop's waves run: base.py (the seam, local threads) or Ray; the pipeline never asks which."""
