"""The library's MCP tools, declared next to the code they use."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Annotated, Literal

from django.db import transaction
from django.db.models import Count, Q
from django.http import HttpRequest
from django.utils import timezone
from pydantic import Field
from typing_extensions import TypedDict

import mcp_expose
from mcp_expose import Conflict, InvocationContext, NotFound, Principal

from . import api, ninja_api, views
from .models import Author, Book, Loan

Genre = Literal["fiction", "science", "history", "children"]


class BookDetail(TypedDict):
    id: int
    title: str
    author: str
    isbn: str
    genre: Genre
    published: str | None
    copies: int
    available: int


def _summary(book: Book) -> dict[str, object]:
    return {"id": book.pk, "title": book.title, "author": book.author.name, "genre": book.genre}


@mcp_expose.tool(read_only=True, open_world=False, scopes=["library:read"])
def search_books(
    query: Annotated[str, Field(description="Words to look for in titles and author names.")] = "",
    genre: Annotated[Genre | None, Field(description="Only books of this genre.")] = None,
    limit: Annotated[int, Field(ge=1, le=50, description="How many books to return at most.")] = 10,
) -> list[dict[str, object]]:
    """Search the catalogue by title or author name."""
    books = Book.objects.select_related("author").order_by("title")
    for word in query.split():
        books = books.filter(Q(title__icontains=word) | Q(author__name__icontains=word))
    if genre is not None:
        books = books.filter(genre=genre)
    return [_summary(book) for book in books[:limit]]


@mcp_expose.tool(
    read_only=True, open_world=False, scopes=["library:read"], app=mcp_expose.App("library/apps/book_card.html")
)
def get_book(book_id: Annotated[int, Field(description="The book's id, as search_books returns it.")]) -> BookDetail:
    """Everything the library knows about one book, including how many copies are on the shelf."""
    book = Book.objects.select_related("author").get(pk=book_id)
    return BookDetail(
        id=book.pk,
        title=book.title,
        author=book.author.name,
        isbn=book.isbn,
        genre=book.genre,  # type: ignore[typeddict-item]
        published=book.published.isoformat() if book.published else None,
        copies=book.copies,
        available=book.available,
    )


@mcp_expose.tool(read_only=True, open_world=False, scopes=["library:read"])
async def library_stats() -> dict[str, int]:
    """How big the library is: books, authors and loans currently out."""
    return {
        "books": await Book.objects.acount(),
        "authors": await Author.objects.acount(),
        "loans_out": await Loan.objects.filter(returned_at__isnull=True).acount(),
    }


@mcp_expose.tool(read_only=True, open_world=False)
async def echo(message: Annotated[str, Field(max_length=1000)], context: InvocationContext) -> dict[str, str]:
    """Repeat a message back, with the name of the caller. Useful to check a connection."""
    return {"message": message, "caller": context.user.get_username() or "anonymous"}


@mcp_expose.tool(read_only=True, open_world=False)
def whoami(request: HttpRequest, principal: Principal) -> dict[str, object]:
    """Who the server thinks you are: your user, the credential you came with (and what code sees of it as
    request.auth), and your scopes."""
    return {
        "user": request.user.get_username(),
        "credential": principal.credential_kind,
        "request_auth": type(request.auth).__name__ if request.auth is not None else None,
        "client_id": principal.client_id,
        "scopes": sorted(principal.scopes),
    }


@mcp_expose.tool(read_only=True, open_world=False, scopes=["library:read"])
def my_loans(principal: Principal) -> list[dict[str, object]]:
    """The books the caller has borrowed and not yet returned."""
    loans = Loan.objects.filter(borrower=principal.user, returned_at__isnull=True).select_related("book")
    return [{"loan_id": loan.pk, "book": loan.book.title, "due_on": loan.due_on} for loan in loans]


@mcp_expose.tool(destructive=False, idempotent=False, open_world=False, scopes=["library:write"])
def borrow_book(
    book_id: int,
    principal: Principal,
    days: Annotated[int, Field(ge=1, le=30, description="Loan length in days.")] = 14,
) -> dict[str, object]:
    """Borrow a book for the caller. Fails when no copy is on the shelf."""
    with transaction.atomic():
        book = Book.objects.select_for_update().filter(pk=book_id).first()
        if book is None:
            raise NotFound(f"There is no book with id {book_id}.")
        if book.available < 1:
            raise Conflict(f"Every copy of {book.title!r} is out on loan.")
        loan = Loan.objects.create(book=book, borrower=principal.user, due_on=date.today() + timedelta(days=days))
    return {"loan_id": loan.pk, "book": book.title, "due_on": loan.due_on}


@mcp_expose.tool(destructive=False, idempotent=True, open_world=False, scopes=["library:write"])
def return_book(loan_id: int, principal: Principal) -> dict[str, object]:
    """Return a borrowed book. Returning it twice is harmless."""
    with transaction.atomic():
        loan = Loan.objects.select_for_update().select_related("book").get(pk=loan_id, borrower=principal.user)
        if loan.returned_at is None:
            loan.returned_at = timezone.now()
            loan.save(update_fields=["returned_at"])
    return {"loan_id": loan.pk, "book": loan.book.title, "returned_at": loan.returned_at}


@mcp_expose.tool(read_only=True, open_world=False, scopes=["library:read"], permissions=["library.view_loan"])
def overdue_loans() -> list[dict[str, object]]:
    """Loans past their due date, for librarians (needs the 'view loan' permission)."""
    loans = (
        Loan.objects.filter(returned_at__isnull=True, due_on__lt=date.today())
        .select_related("book", "borrower")
        .order_by("due_on")
    )
    return [
        {"loan_id": loan.pk, "book": loan.book.title, "borrower": loan.borrower.get_username(), "due_on": loan.due_on}
        for loan in loans
    ]


@mcp_expose.tool(read_only=True, open_world=False, scopes=["library:read"])
def popular_authors(limit: Annotated[int, Field(ge=1, le=20)] = 5) -> list[dict[str, object]]:
    """Authors with the most books in the catalogue."""
    authors = Author.objects.annotate(book_count=Count("books")).order_by("-book_count", "name")[:limit]
    return [{"author": author.name, "books": author.book_count} for author in authors]


@mcp_expose.tool(
    destructive=True,
    idempotent=True,
    open_world=False,
    scopes=["library:write"],
    permissions=["library.delete_book"],
    requires_confirmation=True,
    rate_limit="10/min",
)
def withdraw_book(book_id: int) -> dict[str, object]:
    """Remove a book from the catalogue for good. A person confirms every call; books on loan cannot go."""
    book = Book.objects.select_for_update().get(pk=book_id)
    if book.loans.filter(returned_at__isnull=True).exists():
        raise Conflict(f"{book.title!r} is out on loan; it can be withdrawn once every copy is back.")
    title = book.title
    book.delete()
    return {"withdrawn": title}


@mcp_expose.tool(read_only=True, open_world=False, scopes=["library:read"])
async def inventory(context: InvocationContext) -> dict[str, int]:
    """Count the copies on the shelf, book by book, reporting progress as it goes."""
    total = await Book.objects.acount()
    on_shelf = 0
    done = 0
    async for book in Book.objects.order_by("pk"):
        on_shelf += book.copies - await book.loans.filter(returned_at__isnull=True).acount()
        done += 1
        await context.report_progress(done, total, book.title)
    return {"books": total, "copies_on_shelf": on_shelf}


@mcp_expose.tool(read_only=True, open_world=False, scopes=["library:read"], task="optional", timeout=300)
async def shelf_report(context: InvocationContext) -> dict[str, object]:
    """Go through the catalogue author by author: books, copies, and loans still out.

    Long on a large library, so a client that supports MCP tasks gets a task to follow (its progress is the
    task's status message); any other client waits for the answer as for any call."""
    authors = []
    total = await Author.objects.acount()
    async for author in Author.objects.annotate(books_count=Count("books")).order_by("name"):
        out = await Loan.objects.filter(book__author=author, returned_at__isnull=True).acount()
        authors.append({"author": author.name, "books": author.books_count, "loans_out": out})
        await context.report_progress(len(authors), total, author.name)
    return {"authors": authors, "in_task": context.in_task}


# The REST API and the web pages the library already has, exposed as they are -----------------------------------

mcp_expose.expose_view(api.BookViewSet, actions=["list", "retrieve"], scopes=["library:read"])
mcp_expose.expose_view(api.BookViewSet, actions=["create", "partial_update", "destroy"], scopes=["library:write"])
mcp_expose.expose_view(
    api.LoanViewSet,
    actions=["list", "retrieve"],
    scopes=["library:read"],
    name={"list": "library.loans.mine"},
    # Hosts with MCP Apps show the list as a table (templates/library/apps/loan_table.html).
    app={"list": mcp_expose.App("library/apps/loan_table.html", title="Your loans")},
)
mcp_expose.expose_view(api.LoanViewSet, actions=["create", "destroy", "return_book"], scopes=["library:write"])
# Addressed by slug; a PATCH may change the slug itself, so the URL's is the url_slug argument.
mcp_expose.expose_view(api.AuthorViewSet, actions=["retrieve"], scopes=["library:read"])
mcp_expose.expose_view(api.AuthorViewSet, actions=["partial_update"], scopes=["library:write"])
mcp_expose.expose_view(
    views.BookListView, name="library.catalogue_page", query_params={"q": "Words in the title"}, scopes=["library:read"]
)
mcp_expose.expose_view(views.AuthorCreateView, name="library.add_author_form", scopes=["library:write"])
mcp_expose.expose_view(views.my_summary, name="library.my_summary", scopes=["library:read"], read_only=True)

# The library's Django Ninja API (ninja_api.py): one call per scope; served as library_ninja_list_books and so on.
mcp_expose.expose_ninja(ninja_api.api, operations=["list_books", "get_book"], resource="ninja", scopes=["library:read"])
mcp_expose.expose_ninja(ninja_api.api, operations=["set_copies"], resource="ninja", scopes=["library:write"])

# Authors straight from the model: allow-listed filters and ordering, paged by cursor.
mcp_expose.ModelTools(
    Author,
    actions=["list", "get", "create", "update", "delete"],
    fields=["id", "name", "born"],
    filters={"name": ["exact", "icontains"], "born": ["gte", "lte"]},
    ordering=["name", "born"],
    page_size=5,
    max_page_size=20,
    read_scopes=["library:read"],
    write_scopes=["library:write"],
)


# Resources, prompts and rich results ---------------------------------------------------------------------------

# A 1×1 PNG: the demo's stand-in for a cover image.
COVER_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c63f83f93e13f0006cb0298"
    "7577e9990000000049454e44ae426082"
)


@mcp_expose.resource("library://books/{id}", mime_type="application/json", scopes=["library:read"])
def book_record(id: int) -> dict[str, object]:
    """One book's record, as JSON."""
    book = Book.objects.select_related("author").get(pk=id)
    return {"id": book.pk, "title": book.title, "author": book.author.name, "isbn": book.isbn, "genre": book.genre}


@mcp_expose.resource("library://covers/{id}", mime_type="image/png", scopes=["library:read"])
def book_cover_image(id: int) -> bytes:
    """A book's cover, as PNG."""
    Book.objects.filter(pk=id).get()
    return COVER_PNG


mcp_expose.resource(
    "library://catalogue",
    view=views.BookListView,
    name="library.catalogue",
    mime_type="text/plain",
    scopes=["library:read"],
    description="The catalogue page, as text.",
)


@mcp_expose.tool(read_only=True, open_world=False, scopes=["library:read"])
def book_card(book_id: int) -> list[object]:
    """A book's card: a line of text, its cover image and a link to its full record."""
    book = Book.objects.select_related("author").get(pk=book_id)
    return [
        f"{book.title} by {book.author.name}",
        mcp_expose.Image(COVER_PNG, "image/png"),
        mcp_expose.ResourceLink(uri=f"library://books/{book.pk}", name=book.title, mime_type="application/json"),
    ]


def _genres(prefix: str) -> list[str]:
    return [value for value, _ in Book.Genre.choices if value.startswith(prefix.lower())]


@mcp_expose.prompt(scopes=["library:read"], completions={"genre": _genres, "mood": ["cosy", "curious", "adventurous"]})
def recommend(genre: str, mood: str = "curious") -> list[object]:
    """Ask for a recommendation from the catalogue, in a genre and a mood."""
    titles = ", ".join(Book.objects.filter(genre=genre).order_by("title").values_list("title", flat=True)) or "none"
    return [
        ("user", f"I feel {mood}. Recommend one {genre} book from this library and say why."),
        ("assistant", f"The library's {genre} books are: {titles}. Let me pick one."),
    ]
