"""The WSGI entry a project's `wsgi.py` imports: `get_wsgi_application()`, built in `serving.wsgi_bridge`.

It serves the MCP paths that fit one request and one answer (2026-07-28, and 2025-11-25 statelessly) under any
WSGI server; streams (`subscriptions/listen`, SSE, 2025-11-25 sessions) need `mcp_expose.asgi`. See docs/wsgi.md.
"""

from mcp_expose.serving.wsgi_bridge import get_wsgi_application

__all__ = ["get_wsgi_application"]
