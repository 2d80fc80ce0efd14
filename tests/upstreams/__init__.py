"""Upstream MCP servers for the tests: real processes on loopback, started by `tests/upstream_servers.py`."""
