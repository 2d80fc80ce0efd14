"""WSGI entry for the demo: Django, with the MCP endpoint's stateless paths at /mcp (streams need project.asgi).

Served with e.g. `gunicorn project.wsgi:application --worker-class sync --workers 2 --timeout 60`.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

from mcp_expose.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()
