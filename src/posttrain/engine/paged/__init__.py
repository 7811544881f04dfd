"""The embedded engine: continuous batching over a paged KV cache. Read engine.py first."""
