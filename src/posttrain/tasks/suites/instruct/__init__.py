"""The instruct suite: single-turn replies under verifiable constraints (docs/domains-instruct.md)."""
