"""The library's REST API (Django REST framework): used by people over HTTP, and exposed as MCP tools as is."""

from __future__ import annotations

from datetime import date, timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import filters, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle

from .models import Author, Book, Loan


class AuthorSummarySerializer(serializers.ModelSerializer):
    class Meta:
        model = Author
        fields = ["id", "name", "born"]


class AuthorSerializer(serializers.ModelSerializer):
    class Meta:
        model = Author
        fields = ["slug", "name", "born"]
        extra_kwargs = {"slug": {"required": False}}


class BookSerializer(serializers.ModelSerializer):
    author_detail = AuthorSummarySerializer(source="author", read_only=True)
    available = serializers.IntegerField(read_only=True)

    class Meta:
        model = Book
        fields = [
            "id",
            "title",
            "author",
            "author_detail",
            "isbn",
            "genre",
            "published",
            "price",
            "copies",
            "available",
        ]
        extra_kwargs = {"title": {"help_text": "The book's title as printed."}}


class BookPages(PageNumberPagination):
    page_size = 3
    page_size_query_param = "page_size"
    max_page_size = 20


class IsStaffOrReadOnly(permissions.BasePermission):
    def has_permission(self, request, view):  # type: ignore[no-untyped-def]
        return request.method in permissions.SAFE_METHODS or bool(request.user and request.user.is_staff)


class AuthorViewSet(viewsets.ModelViewSet):
    """Authors, addressed by slug: /api/authors/ursula-k-le-guin/. Renaming one's slug is a PATCH."""

    queryset = Author.objects.order_by("name")
    serializer_class = AuthorSerializer
    permission_classes = [permissions.IsAuthenticated, IsStaffOrReadOnly]
    lookup_field = "slug"
    lookup_value_regex = "[a-z0-9-]+"


class BookViewSet(viewsets.ModelViewSet):
    """The library's catalogue."""

    queryset = Book.objects.select_related("author").order_by("title")
    serializer_class = BookSerializer
    permission_classes = [permissions.IsAuthenticated, IsStaffOrReadOnly]
    filter_backends = [DjangoFilterBackend, filters.SearchFilter, filters.OrderingFilter]
    filterset_fields = ["genre", "author"]
    search_fields = ["title", "author__name"]
    ordering_fields = ["title", "published", "price"]
    pagination_class = BookPages


class LoanSerializer(serializers.ModelSerializer):
    borrower = serializers.CharField(source="borrower.username", read_only=True)
    days = serializers.IntegerField(
        write_only=True, min_value=1, max_value=30, default=14, help_text="How many days to borrow the book for."
    )

    class Meta:
        model = Loan
        fields = ["id", "book", "borrower", "borrowed_on", "due_on", "returned_at", "days"]
        read_only_fields = ["borrowed_on", "due_on", "returned_at"]

    def validate_book(self, book: Book) -> Book:
        if book.available < 1:
            raise serializers.ValidationError("Every copy is out on loan.")
        return book

    def create(self, validated_data):  # type: ignore[no-untyped-def]
        days = validated_data.pop("days")
        return Loan.objects.create(due_on=date.today() + timedelta(days=days), **validated_data)


class StaffLoanSerializer(LoanSerializer):
    """What staff send: a loan may be made out to another member, at the desk."""

    borrower = serializers.SlugRelatedField(
        slug_field="username",
        queryset=get_user_model().objects.all(),
        required=False,
        help_text="Lend to this member (their username); yourself if left out.",
    )


class IsBorrowerOrStaff(permissions.BasePermission):
    """Object level: a loan is yours to see and return, unless you are staff."""

    message = "This loan belongs to someone else."

    def has_object_permission(self, request, view, obj):  # type: ignore[no-untyped-def]
        return request.user.is_staff or obj.borrower_id == request.user.pk


class LoanViewSet(viewsets.ModelViewSet):
    """Loans: borrow a book, see your loans, return them."""

    serializer_class = LoanSerializer
    permission_classes = [permissions.IsAuthenticated, IsBorrowerOrStaff]
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "loans"
    http_method_names = ["get", "post", "delete", "head", "options"]

    def get_queryset(self):  # type: ignore[no-untyped-def]
        loans = Loan.objects.select_related("book", "borrower").order_by("-pk")
        # Listing shows your own loans; looking one up by id finds anyone's, so that the
        # object permission (not a 404) answers for other people's loans.
        if self.action == "list" and not self.request.user.is_staff:
            return loans.filter(borrower=self.request.user)
        return loans

    def get_serializer_class(self):  # type: ignore[no-untyped-def]
        # Staff lend at the desk, to anyone; members borrow for themselves. Over MCP, each sees their own schema.
        if self.action == "create" and self.request.user.is_staff:
            return StaffLoanSerializer
        return super().get_serializer_class()

    def perform_create(self, serializer):  # type: ignore[no-untyped-def]
        with transaction.atomic():
            serializer.save(borrower=serializer.validated_data.get("borrower") or self.request.user)

    @action(detail=True, methods=["post"], serializer_class=serializers.Serializer)
    def return_book(self, request, pk=None):  # type: ignore[no-untyped-def]
        """Return a borrowed book. Returning it twice is harmless."""
        loan = self.get_object()
        if loan.returned_at is None:
            loan.returned_at = timezone.now()
            loan.save(update_fields=["returned_at"])
        return Response(LoanSerializer(loan).data, status=status.HTTP_200_OK)
