"""The longctx suite: retrieval and reasoning over a haystack grown to a token budget; its probes."""
