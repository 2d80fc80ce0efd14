"""Django 5.2 project serving django-stateless-mcp 0.1.11 (the peer "django-stateless-mcp").

Shared settings from common/bench_peer_settings.py (its SECRET_KEY is the >= 32 bytes request_state_security()
wants). Tools: dsm_tools/mcp.py, found by the package's mcp.py autodiscovery.
"""

import bench_peer_settings

globals().update(bench_peer_settings.django_settings())

INSTALLED_APPS = [*bench_peer_settings.CORE_APPS, "django_stateless_mcp", "dsm_tools"]
ROOT_URLCONF = "dsm_project.urls"
ASGI_APPLICATION = "dsm_project.asgi.application"
