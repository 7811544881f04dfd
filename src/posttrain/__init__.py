"""posttrain: an open post-training stack for agentic language models."""

__version__ = "0.1.0"
