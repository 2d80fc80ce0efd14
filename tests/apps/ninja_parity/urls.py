"""The demo's URLs plus the Ninja parity API at /ninja-parity/ (tests/test_ninja_parity.py)."""

from django.urls import path

from project.urls import urlpatterns as demo_urlpatterns

from .api import api

urlpatterns = [path("ninja-parity/", api.urls), *demo_urlpatterns]
