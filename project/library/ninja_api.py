"""The library's Django Ninja API, beside its DRF one: served at /ninja/ over HTTP, and as MCP tools by one call
(`expose_ninja` in mcp.py), so their names read `library_ninja_...`."""

from datetime import date
from decimal import Decimal

from django.db.models import QuerySet
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Field, NinjaAPI, Query, Router, Schema
from ninja.errors import HttpError
from ninja.pagination import PageNumberPagination, paginate
from ninja.security import django_auth_is_staff

from .models import Book


class BookOut(Schema):
    id: int
    title: str
    author: str = Field(alias="author.name")
    genre: str
    published: date | None
    price: Decimal
    copies: int


class BookFilter(Schema):
    genre: Book.Genre | None = Field(None, description="Only books of this genre.")
    max_price: Decimal | None = Field(None, ge=0, description="Only books costing at most this.")


class CopiesIn(Schema):
    copies: int = Field(ge=0, le=1000, description="Copies the library owns from now on.")


router = Router(tags=["books"])


@router.get("/books", response=list[BookOut])
@paginate(PageNumberPagination, page_size=5)
def list_books(request: HttpRequest, filters: Query[BookFilter]) -> QuerySet[Book]:
    """List the library's books, five a page, optionally of one genre or up to a price."""
    books = Book.objects.select_related("author")
    if filters.genre:
        books = books.filter(genre=filters.genre)
    if filters.max_price is not None:
        books = books.filter(price__lte=filters.max_price)
    return books


@router.get("/books/{book_id}", response=BookOut)
async def get_book(request: HttpRequest, book_id: int) -> Book:
    """Get one book by its id."""
    book = await Book.objects.select_related("author").filter(pk=book_id).afirst()
    if book is None:
        raise HttpError(404, f"No book has the id {book_id}.")
    return book


@router.patch("/books/{book_id}/copies", response=BookOut, auth=django_auth_is_staff)
def set_copies(request: HttpRequest, book_id: int, payload: CopiesIn) -> Book:
    """Set how many copies of a book the library owns (staff only)."""
    book = get_object_or_404(Book.objects.select_related("author"), pk=book_id)
    if payload.copies < book.copies - book.available:
        raise HttpError(409, f"{book.copies - book.available} copies are on loan; keep at least that many.")
    book.copies = payload.copies
    book.save(update_fields=["copies"])
    return book


api = NinjaAPI(title="Library (Django Ninja)", urls_namespace="library-ninja", docs_url=None)
api.add_router("/", router)
