"""Views that read what middleware sets on the request, exposed as tools in mcp.py and routed in tests/urls.py."""

from __future__ import annotations

import threading
from typing import Any

from django.http import HttpRequest, JsonResponse
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView


def _seen(request: Any) -> dict[str, Any]:
    thread = getattr(request, "middleware_thread", None)
    return {
        "tenant": getattr(request, "tenant", None),
        "locale": getattr(request, "locale", None),
        "view_name": getattr(request, "view_name", None),
        "middleware_on_this_thread": None if thread is None else thread == threading.get_ident(),
    }


class TenantView(APIView):
    """What the request carries from middleware, as this DRF view sees it."""

    permission_classes = [IsAuthenticated]

    def get(self, request: Request) -> Response:
        return Response(_seen(request))


def tenant_page(request: HttpRequest) -> JsonResponse:
    """What the request carries from middleware, as this plain Django view sees it."""
    return JsonResponse(_seen(request))
