"""The demo's URLs plus the toolbox's own view."""

from django.urls import path

from project.urls import urlpatterns as demo_urlpatterns
from tests.apps.toolbox.api import ShipmentView

urlpatterns = [path("toolbox/shipments/", ShipmentView.as_view(), name="toolbox-shipments"), *demo_urlpatterns]
