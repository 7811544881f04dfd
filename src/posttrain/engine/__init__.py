"""Generation engines: the in-process paged engine (LocalEngine), RemoteEngine, the tiny model."""
