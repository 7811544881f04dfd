"""Engines over HTTP, one file per server API, and weight staging for servers that load from files."""
