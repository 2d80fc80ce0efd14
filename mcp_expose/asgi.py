"""The ASGI entry a project's `asgi.py` imports: `get_asgi_application()`, built in `serving.asgi`."""

from mcp_expose.serving.asgi import get_asgi_application

__all__ = ["get_asgi_application"]
