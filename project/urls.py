from django.conf import settings
from django.contrib import admin
from django.contrib.staticfiles.views import serve as serve_static
from django.urls import include, path, re_path
from rest_framework.routers import DefaultRouter

from project.library import api, ninja_api, views

router = DefaultRouter()
router.register("books", api.BookViewSet, basename="book")
router.register("loans", api.LoanViewSet, basename="loan")
router.register("authors", api.AuthorViewSet, basename="author")

urlpatterns = [
    path("", views.home, name="home"),
    path("favicon.ico", views.no_favicon),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include(router.urls)),
    path("ninja/", ninja_api.api.urls),
    path("books/", views.BookListView.as_view(), name="library-books"),
    path("authors/new/", views.AuthorCreateView.as_view(), name="library-author-new"),
    path("me/summary/", views.my_summary, name="library-my-summary"),
    # The authorization server (django-oauth-toolkit) and its RFC 8414 metadata at the site root.
    path("o/", include("mcp_expose.oauth.urls", namespace="oauth2_provider")),
    path("", include("mcp_expose.urls")),
]

# uvicorn serves no static files itself, and the demo runs with DEBUG off: Django serves the admin's CSS and
# scripts from the apps' static folders (no collectstatic). A real deployment serves them from its web server.
urlpatterns += [re_path(rf"^{settings.STATIC_URL.lstrip('/')}(?P<path>.*)$", serve_static, {"insecure": True})]
