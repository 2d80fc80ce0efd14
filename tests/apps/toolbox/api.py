"""A DRF view taking a writable nested serializer, so that nested bodies can be seen closed end to end."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView


class AddressSerializer(serializers.Serializer):
    street = serializers.CharField(max_length=100)
    city = serializers.CharField()


class ShipmentSerializer(serializers.Serializer):
    recipient = serializers.CharField()
    address = AddressSerializer()
    labels = serializers.DictField(child=serializers.CharField(), required=False)
    extra = serializers.JSONField(required=False)


class ShipmentView(APIView):
    """Check a shipment and send back what the serializer accepted (nothing is stored)."""

    serializer_class = ShipmentSerializer

    def post(self, request):  # type: ignore[no-untyped-def]
        serializer = ShipmentSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(serializer.validated_data)
