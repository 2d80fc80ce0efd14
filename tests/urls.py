"""The demo's URLs, plus the toolbox views the live tests expose (see tests/settings_live.py)."""

from django.urls import path

from project.urls import urlpatterns as demo_urlpatterns
from tests.apps.toolbox import views
from tests.apps.toolbox.api import ShipmentView

urlpatterns = [
    path("toolbox/shipments/", ShipmentView.as_view(), name="toolbox-shipments"),
    path("toolbox/tenant/", views.TenantView.as_view(), name="toolbox-tenant"),
    path("toolbox/tenant-page/", views.tenant_page, name="toolbox-tenant-page"),
    *demo_urlpatterns,
]
