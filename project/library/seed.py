"""Demo data: a few authors and books, created once."""

from datetime import date
from decimal import Decimal

from .models import Author, Book

BOOKS = [
    ("Ursula K. Le Guin", 1929, "A Wizard of Earthsea", "978-0-547-72202-3", "fiction", date(1968, 11, 1), "9.99", 3),
    (
        "Ursula K. Le Guin",
        1929,
        "The Left Hand of Darkness",
        "978-0-441-47812-5",
        "fiction",
        date(1969, 3, 1),
        "12.50",
        2,
    ),
    ("Carl Sagan", 1934, "Cosmos", "978-0-345-53943-4", "science", date(1980, 10, 1), "18.00", 2),
    ("Carl Sagan", 1934, "Pale Blue Dot", "978-0-345-37659-6", "science", date(1994, 11, 1), "16.00", 1),
    ("Mary Beard", 1955, "SPQR", "978-1-631-49222-8", "history", date(2015, 10, 20), "20.00", 1),
    ("Astrid Lindgren", 1907, "Pippi Longstocking", "978-0-142-40276-4", "children", date(1945, 11, 26), "7.99", 4),
    ("Terry Pratchett", 1948, "Small Gods", "978-0-062-23737-4", "fiction", date(1992, 5, 1), "9.99", 2),
    ("Rachel Carson", 1907, "Silent Spring", "978-0-618-24906-0", "science", date(1962, 9, 27), "14.95", 1),
]


def seed_library() -> int:
    """Create the demo books that are missing; returns how many were created."""
    created = 0
    for author_name, born, title, isbn, genre, published, price, copies in BOOKS:
        author, _ = Author.objects.get_or_create(name=author_name, defaults={"born": born})
        _, was_created = Book.objects.get_or_create(
            isbn=isbn,
            defaults={
                "title": title,
                "author": author,
                "genre": genre,
                "published": published,
                "price": Decimal(price),
                "copies": copies,
            },
        )
        created += was_created
    return created
