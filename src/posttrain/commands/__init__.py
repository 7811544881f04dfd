"""CLI command groups. Each module exposes `register(app: typer.Typer)`; cli.py lists them."""
