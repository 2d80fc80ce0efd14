"""A small lending library: the demo's real data."""

from datetime import date
from typing import Any

from django.conf import settings
from django.db import models
from django.utils.text import slugify


class Author(models.Model):
    name = models.CharField(max_length=200, unique=True)
    slug = models.SlugField(
        max_length=200, unique=True, blank=True, help_text="The author in URLs: /api/authors/<slug>/."
    )
    born = models.PositiveIntegerField(null=True, blank=True, help_text="Year of birth.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self.slug:
            self.slug = unique_slug(self.name, Author.objects.exclude(pk=self.pk))
        super().save(*args, **kwargs)


def unique_slug(name: str, others: Any) -> str:
    """`name` as a slug no other row has: "ursula-k-le-guin", then "ursula-k-le-guin-2"."""
    base = slugify(name)[:190] or "author"
    slug, number = base, 1
    while others.filter(slug=slug).exists():
        number += 1
        slug = f"{base}-{number}"
    return slug


class Book(models.Model):
    class Genre(models.TextChoices):
        FICTION = "fiction", "Fiction"
        SCIENCE = "science", "Science"
        HISTORY = "history", "History"
        CHILDREN = "children", "Children"

    title = models.CharField(max_length=300)
    author = models.ForeignKey(Author, on_delete=models.PROTECT, related_name="books")
    isbn = models.CharField("ISBN", max_length=17, unique=True)
    genre = models.CharField(max_length=20, choices=Genre.choices, default=Genre.FICTION)
    published = models.DateField(null=True, blank=True)
    price = models.DecimalField(max_digits=8, decimal_places=2, default=0)
    copies = models.PositiveIntegerField(default=1, help_text="Copies the library owns.")

    class Meta:
        ordering = ["title"]

    def __str__(self) -> str:
        return self.title

    @property
    def available(self) -> int:
        return self.copies - self.loans.filter(returned_at__isnull=True).count()


class Loan(models.Model):
    book = models.ForeignKey(Book, on_delete=models.CASCADE, related_name="loans")
    borrower = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="loans")
    borrowed_on = models.DateField(default=date.today)
    due_on = models.DateField()
    returned_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-borrowed_on", "-pk"]

    def __str__(self) -> str:
        return f"{self.book} → {self.borrower}"
