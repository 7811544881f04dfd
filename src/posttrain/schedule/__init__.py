"""Deciding what runs next: task sampling with resumable state (see sampler.py)."""
