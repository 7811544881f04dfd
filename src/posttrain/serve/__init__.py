"""HTTP serving: an OpenAI-compatible server around the embedded engine."""
