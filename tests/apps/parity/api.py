"""DRF view patterns the parity tests call both ways, over HTTP and through MCP (tests/test_view_parity.py)."""

from __future__ import annotations

import csv

import django_filters
from django.http import HttpResponse
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import generics, parsers, permissions, serializers, status, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from project.library.api import BookSerializer
from project.library.models import Author, Book


class BookReport(APIView):
    """The catalogue as CSV: a plain Django response from a DRF view."""

    permission_classes = [permissions.IsAuthenticated]

    def get(self, request):  # type: ignore[no-untyped-def]
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        writer = csv.writer(response)
        writer.writerow(["title", "price"])
        for book in Book.objects.order_by("title"):
            writer.writerow([book.title, book.price])
        return response


class CoverSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=100)
    cover = serializers.FileField()


class CoverUpload(APIView):
    """Take a cover image by multipart upload, and say what arrived (nothing is stored)."""

    parser_classes = [parsers.MultiPartParser]
    serializer_class = CoverSerializer

    def post(self, request):  # type: ignore[no-untyped-def]
        serializer = CoverSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        cover = serializer.validated_data["cover"]
        return Response(
            {
                "title": serializer.validated_data["title"],
                "name": cover.name,
                "size": cover.size,
                "head": cover.read(4).hex(),
            },
            status=status.HTTP_201_CREATED,
        )


class RawUpload(APIView):
    """A raw-body upload (FileUploadParser): nothing an MCP argument can carry."""

    parser_classes = [parsers.FileUploadParser]
    serializer_class = CoverSerializer

    def put(self, request):  # type: ignore[no-untyped-def]
        return Response({"size": request.data["file"].size})


class TagsSerializer(serializers.Serializer):
    tags = serializers.ListField(child=serializers.CharField(max_length=20), max_length=5, min_length=1)


class TagCheck(generics.GenericAPIView):
    """Check a list of tags: at most five."""

    serializer_class = TagsSerializer

    def post(self, request):  # type: ignore[no-untyped-def]
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(serializer.validated_data)


class BookPriceFilter(django_filters.FilterSet):
    cheaper_than = django_filters.NumberFilter(field_name="price", lookup_expr="lt")

    class Meta:
        model = Book
        fields = ["genre"]


class CheapBooks(generics.ListAPIView):
    """Books below a price, as a decimal."""

    queryset = Book.objects.order_by("title")
    serializer_class = BookSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = BookPriceFilter


class AuthorNotesSerializer(serializers.ModelSerializer):
    """Staff may also record an author's year of birth: the fields depend on who asks (get_fields)."""

    class Meta:
        model = Author
        fields = ["name", "born"]

    def get_fields(self):  # type: ignore[no-untyped-def]
        fields = super().get_fields()
        request = self.context.get("request")
        if not (request is not None and request.user.is_staff):
            fields.pop("born")
        return fields


class AuthorNotes(viewsets.ModelViewSet):
    queryset = Author.objects.order_by("name")
    serializer_class = AuthorNotesSerializer
    permission_classes = [permissions.IsAuthenticated]
    http_method_names = ["post"]


class Withdrawn(APIView):
    """A title the library no longer carries: 410 Gone."""

    def get(self, request):  # type: ignore[no-untyped-def]
        return Response({"detail": "This title was withdrawn."}, status=status.HTTP_410_GONE)


class ReportedBy(APIView):
    """Where links from this view point (what `build_absolute_uri` gives)."""

    def get(self, request):  # type: ignore[no-untyped-def]
        return Response({"link": request.build_absolute_uri("/api/books/")})


class Shelf(APIView):
    """One shelf, by its slug in a re_path route."""

    def get(self, request, shelf):  # type: ignore[no-untyped-def]
        return Response({"shelf": shelf})
