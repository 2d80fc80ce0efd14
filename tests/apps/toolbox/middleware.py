"""Middleware a project might run for its views (tenant, locale), named in VIEW_MIDDLEWARE by the live tests."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.deprecation import MiddlewareMixin


class TenantMiddleware(MiddlewareMixin):
    """The tenant from the X-Tenant header, as a multi-tenant project's middleware sets it, and the view's name."""

    def process_request(self, request: HttpRequest) -> None:
        request.tenant = request.headers.get("X-Tenant", "public")  # type: ignore[attr-defined]

    def process_view(
        self, request: HttpRequest, view_func: Callable[..., HttpResponse], args: tuple, kwargs: dict
    ) -> None:
        request.view_name = getattr(view_func, "view_class", view_func).__name__  # type: ignore[attr-defined]

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        response["X-Tenant"] = getattr(request, "tenant", "")
        return response


def locale_middleware(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """Function middleware: a locale, and the thread it ran on (the view's own, inside the call's hop)."""

    def middleware(request: HttpRequest) -> HttpResponse:
        request.locale = "fr"  # type: ignore[attr-defined]
        request.middleware_thread = threading.get_ident()  # type: ignore[attr-defined]
        return get_response(request)

    return middleware


def closed_tenants(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """Answers by itself for some tenants, so the view never runs: refused when closed, a notice in maintenance."""

    def middleware(request: HttpRequest) -> HttpResponse:
        tenant = request.headers.get("X-Tenant")
        if tenant == "closed":
            return JsonResponse({"detail": "This tenant is closed."}, status=403)
        if tenant == "maintenance":
            return JsonResponse({"maintenance": True})
        return get_response(request)

    return middleware
