"""The agent: the text protocol, chat framing, the multi-turn loop, trials (oracle, verify) and demos."""
