"""Recipes: whole jobs composed from the layers (the CLI's commands call these)."""
