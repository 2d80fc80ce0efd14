"""Django Ninja operations that tests/test_ninja_parity.py calls over HTTP and through MCP: one per pattern a
Ninja API uses (parameters from each source, nested bodies, each kind of refusal, pagination, auth, async, files,
answers that are not JSON). Deliberately without `from __future__ import annotations`: Ninja reads the
annotations at import."""

from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from ninja import Field, File, Form, Header, NinjaAPI, Query, Router, Schema, UploadedFile
from ninja.errors import HttpError
from ninja.pagination import LimitOffsetPagination, PageNumberPagination, PaginationBase, paginate
from ninja.responses import Status
from ninja.security import HttpBearer, django_auth, django_auth_superuser
from pydantic import field_validator

from project.library.models import Author, Book


class AuthorOut(Schema):
    id: int
    name: str
    born: int | None


class BookOut(Schema):
    id: int
    title: str
    author: AuthorOut
    genre: str
    copies: int


class TagIn(Schema):
    name: str = Field(min_length=1, max_length=20)


class NoteIn(Schema):
    text: str = Field(max_length=200, description="A note for the shelf card.")
    tags: list[TagIn] = []


class BookIn(Schema):
    title: str = Field(min_length=1, max_length=300, description="The title as printed.")
    isbn: str = Field(pattern=r"^[0-9-]{1,17}$")
    genre: Book.Genre = Book.Genre.FICTION
    copies: int = Field(1, ge=0, le=100)
    note: NoteIn | None = None

    @field_validator("title")
    @classmethod
    def not_shouted(cls, value: str) -> str:
        if len(value) > 1 and value.isupper():
            raise ValueError("Write the title as printed, not in capitals.")
        return value


class BookFilter(Schema):
    genre: Book.Genre | None = None
    min_copies: int = Field(0, ge=0)


class Window(PaginationBase):
    """A custom paginator: a window of `size` books from `start`."""

    class Input(Schema):
        start: int = Field(0, ge=0)
        size: int = Field(2, ge=1, le=10)

    class Output(Schema):
        items: list[Any]
        start: int
        total: int

    def paginate_queryset(self, queryset: Any, pagination: Any, **params: Any) -> Any:
        return {
            "items": queryset[pagination.start : pagination.start + pagination.size],
            "start": pagination.start,
            "total": queryset.count(),
        }


class LibraryToken(HttpBearer):
    """An API token of the API's own: over MCP, the caller's MCP credential stands in for it."""

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        return User.objects.filter(username="alice").first() if token == "library-token" else None


router = Router()


@router.get("/authors/{author_id}/books", response=list[BookOut])
def author_books(request: HttpRequest, author_id: int, filters: Query[BookFilter]) -> Any:
    """The books of one author, by genre and copies."""
    author = get_object_or_404(Author, pk=author_id)
    books = Book.objects.filter(author=author, copies__gte=filters.min_copies).select_related("author")
    return books.filter(genre=filters.genre) if filters.genre else books


@router.post("/authors/{author_id}/books", response={201: BookOut}, auth=django_auth)
def add_book(request: HttpRequest, author_id: int, payload: BookIn) -> Any:
    author = get_object_or_404(Author, pk=author_id)
    if Book.objects.filter(isbn=payload.isbn).exists():
        raise HttpError(409, "A book with that ISBN is already on the shelves.")
    book = Book.objects.create(
        author=author, title=payload.title, isbn=payload.isbn, genre=payload.genre, copies=payload.copies
    )
    return Status(201, book)


@router.put("/books/{isbn}", response=BookOut, auth=django_auth)
def replace_book(request: HttpRequest, isbn: str, payload: BookIn) -> Any:
    """The path's isbn names the book; the body's is its new one (so over MCP the path's is `url_isbn`)."""
    book = get_object_or_404(Book, isbn=isbn)
    book.title, book.isbn, book.genre, book.copies = payload.title, payload.isbn, payload.genre, payload.copies
    book.save()
    return book


@router.delete("/books/{isbn}", response={204: None}, auth=django_auth_superuser)
def remove_book(request: HttpRequest, isbn: str) -> Any:
    get_object_or_404(Book, isbn=isbn).delete()
    return Status(204, None)


@router.get("/withdrawn/{book_id}")
def withdrawn(request: HttpRequest, book_id: int) -> Any:
    raise HttpError(410, f"Book {book_id} was withdrawn.")


@router.get("/reserved")
def reserved(request: HttpRequest) -> Any:
    raise HttpError(403, "The reserved shelf is for librarians.")


@router.get("/pages/number", response=list[BookOut])
@paginate(PageNumberPagination, page_size=2)
def by_page(request: HttpRequest) -> Any:
    return Book.objects.select_related("author").order_by("title")


@router.get("/pages/offset", response=list[BookOut])
@paginate(LimitOffsetPagination)
def by_offset(request: HttpRequest) -> Any:
    return Book.objects.select_related("author").order_by("title")


@router.get("/pages/window", response=list[BookOut])
@paginate(Window)
def by_window(request: HttpRequest) -> Any:
    return Book.objects.select_related("author").order_by("title")


@router.get("/me", auth=django_auth)
def me(request: HttpRequest) -> dict[str, Any]:
    return {"username": request.user.username, "auth_is_the_user": request.auth == request.user}  # type: ignore[attr-defined]


@router.get("/token-shelf", auth=LibraryToken())
def token_shelf(request: HttpRequest) -> dict[str, Any]:
    return {"shelf": "token", "authenticated": bool(request.auth)}  # type: ignore[attr-defined]


@router.get("/async/books/{book_id}", response=BookOut)
async def async_book(request: HttpRequest, book_id: int) -> Any:
    book = await Book.objects.select_related("author").filter(pk=book_id).afirst()
    if book is None:
        raise HttpError(404, f"No book has the id {book_id}.")
    return book


@router.get("/async/tenant")
async def async_tenant(request: HttpRequest) -> dict[str, Any]:
    """What a VIEW_MIDDLEWARE middleware set on the request, if one ran."""
    return {"tenant": getattr(request, "tenant", None)}


@router.get("/report.csv")
def report(request: HttpRequest) -> HttpResponse:
    rows = "\n".join(f"{book.title},{book.copies}" for book in Book.objects.order_by("title"))
    return HttpResponse(f"title,copies\n{rows}\n", content_type="text/csv")


@router.post("/covers", auth=django_auth)
def upload_cover(request: HttpRequest, cover: File[UploadedFile], caption: Form[str]) -> dict[str, Any]:
    return {"name": cover.name, "size": cover.size, "head": cover.read(4).hex(), "caption": caption}


@router.get("/shelf-mark")
def shelf_mark(request: HttpRequest, branch: str = Header(..., alias="X-Branch", max_length=20)) -> dict[str, Any]:  # noqa: B008
    return {"branch": branch}


shelves = Router()


@shelves.get("/{shelf}/count")
def shelf_count(request: HttpRequest, shelf: str) -> dict[str, Any]:
    """A router mounted inside another: exposed with it."""
    return {"shelf": shelf, "books": Book.objects.filter(genre=shelf).count()}


router.add_router("/shelves", shelves)

api = NinjaAPI(urls_namespace="ninja-parity", docs_url=None)
api.add_router("/parity", router)
