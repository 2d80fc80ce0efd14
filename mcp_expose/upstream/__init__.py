"""Upstream MCP servers: other servers' tools, re-exposed here, namespaced, pinned, approved and bounded.

What an upstream sends is untrusted input. Every field of it passes a bounded reader (`bounded_json`, `reader`)
before anything here keeps it; its address passes the SSRF guard (`core.ssrf_guard`); the secrets we send it are sealed
at rest (`sealing`). The layer sits between `models` and `catalog`: the catalog's provider reads approved upstream
tools as it reads the admin's prompts. It imports `models`, `declare` and `core`, and the SDK's client.
"""
