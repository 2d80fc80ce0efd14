from django.contrib import admin

from .models import Author, Book, Loan


@admin.register(Author)
class AuthorAdmin(admin.ModelAdmin):
    list_display = ["name", "born"]
    search_fields = ["name"]


@admin.register(Book)
class BookAdmin(admin.ModelAdmin):
    list_display = ["title", "author", "genre", "published", "copies"]
    list_filter = ["genre"]
    search_fields = ["title", "isbn", "author__name"]


@admin.register(Loan)
class LoanAdmin(admin.ModelAdmin):
    list_display = ["book", "borrower", "borrowed_on", "due_on", "returned_at"]
    list_filter = ["returned_at"]
