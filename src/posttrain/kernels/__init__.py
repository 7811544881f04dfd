"""Torch numerics the engine and the trainer share: packed linears, HF-exact decoder pieces, exact attention. Imports torch only."""
