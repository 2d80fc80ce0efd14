"""Plain Django views (not DRF) whose refusals are exceptions Django's handler turns into error pages."""

from __future__ import annotations

from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404

from project.library.models import Book


def book_title(request: HttpRequest, book_id: int) -> JsonResponse:
    """The title of one book (a 404 page for a book that does not exist)."""
    return JsonResponse({"title": get_object_or_404(Book, pk=book_id).title})


def shelf_mark(request: HttpRequest) -> JsonResponse:
    """A shelf mark checked as a view checks a value it distrusts (a 400 page for one that is not)."""
    mark = request.GET.get("mark", "")
    if not mark.isalnum():
        raise SuspiciousOperation(f"shelf mark {mark!r} tried to leave the shelves")
    return JsonResponse({"mark": mark.upper()})
