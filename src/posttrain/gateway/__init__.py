"""The serving gateway: one OpenAI-compatible API in front of several model variants."""
