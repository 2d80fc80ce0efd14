"""ASGI entry for the demo: Django, with the MCP endpoint at /mcp."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

from mcp_expose.asgi import get_asgi_application  # noqa: E402

application = get_asgi_application()
