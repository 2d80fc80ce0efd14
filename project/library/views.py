from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.mixins import LoginRequiredMixin, PermissionRequiredMixin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse_lazy
from django.views.generic import CreateView, ListView

from mcp_expose.core.conf import get_settings

from .models import Author, Book, Loan


def no_favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for it on every page; answering keeps their consoles free of 404s."""
    return HttpResponse(status=204)


def home(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "home.html",
        {"mcp_url": request.build_absolute_uri(get_settings().PATH), "debug": settings.DEBUG},
    )


class BookListView(ListView):
    """The catalogue as a web page, searchable by title."""

    model = Book
    paginate_by = 5
    template_name = "library/book_list.html"

    def get_queryset(self):  # type: ignore[no-untyped-def]
        books = Book.objects.select_related("author").order_by("title")
        query = self.request.GET.get("q", "").strip()
        return books.filter(title__icontains=query) if query else books


class AuthorCreateView(LoginRequiredMixin, PermissionRequiredMixin, CreateView):
    """Add an author to the catalogue (librarians only)."""

    model = Author
    fields = ["name", "born"]
    permission_required = "library.add_author"
    template_name = "library/author_form.html"
    success_url = reverse_lazy("library-books")


@login_required
def my_summary(request: HttpRequest) -> JsonResponse:
    """How many books you have on loan and when the next one is due."""
    loans = Loan.objects.filter(borrower=request.user, returned_at__isnull=True).order_by("due_on")
    first = loans.first()
    return JsonResponse({"on_loan": loans.count(), "next_due": first.due_on.isoformat() if first else None})
