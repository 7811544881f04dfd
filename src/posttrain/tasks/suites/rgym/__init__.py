"""The reasoning-gym suite: any reasoning-gym dataset as single-turn tasks (docs/domains-ecosystem.md)."""
