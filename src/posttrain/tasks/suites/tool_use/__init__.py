"""The `tool-use` suite: multi-turn tasks solved only through declared, stateful tools."""
