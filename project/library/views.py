from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from mcp_expose.conf import get_settings


def home(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "home.html",
        {"mcp_url": request.build_absolute_uri(get_settings().PATH), "debug": settings.DEBUG},
    )
