"""The demo's URLs plus the parity views (tests/test_view_parity.py)."""

from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from project.urls import urlpatterns as demo_urlpatterns

from . import api, pages

router = SimpleRouter()
router.register("parity/author-notes", api.AuthorNotes, basename="parity-author-notes")

urlpatterns = [
    path("parity/report.csv", api.BookReport.as_view(), name="parity-report"),
    path("parity/covers/", api.CoverUpload.as_view(), name="parity-covers"),
    path("parity/raw/", api.RawUpload.as_view(), name="parity-raw"),
    path("parity/tags/", api.TagCheck.as_view(), name="parity-tags"),
    path("parity/cheap/", api.CheapBooks.as_view(), name="parity-cheap"),
    path("parity/withdrawn/", api.Withdrawn.as_view(), name="parity-withdrawn"),
    path("parity/link/", api.ReportedBy.as_view(), name="parity-link"),
    path("parity/pages/books/<int:book_id>/title/", pages.book_title, name="parity-book-title"),
    path("parity/pages/shelf-mark/", pages.shelf_mark, name="parity-shelf-mark"),
    re_path(r"^parity/shelves/(?P<shelf>[a-z0-9-]+)/$", api.Shelf.as_view(), name="parity-shelf"),
    *router.urls,
    *demo_urlpatterns,
]
