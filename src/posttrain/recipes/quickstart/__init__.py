"""The quickstart recipe: tasks, SFT warm start, eval, GRPO, eval again, in one process.
Read run.py first; config.py is its config and presets."""
