from django.conf import settings
from django.contrib import admin
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import include, path

from project.library import views

urlpatterns = [
    path("", views.home, name="home"),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    # The authorization server (django-oauth-toolkit) and its RFC 8414 metadata at the site root.
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("", include("mcp_expose.urls")),
]

if settings.DEBUG:
    # uvicorn serves no static files itself; in the demo, Django does.
    urlpatterns += staticfiles_urlpatterns()
