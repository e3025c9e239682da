"""The quarantine queue of a collection: list, inspect, approve, reject (admin role)."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from collections_app.models import QuarantineItem
from collections_app.selectors import quarantine_queue
from collections_app.services import quarantine_approve, quarantine_reject, quarantine_review
from ragsite.api.access import collection_for, object_or_404
from ragsite.api.serializers import (
    ApprovalSerializer,
    BulkApproveSerializer,
    BulkRejectSerializer,
    BulkResultSerializer,
    BulkReviewSerializer,
    QuarantineFilterSerializer,
    QuarantineItemDetailSerializer,
    QuarantineItemSerializer,
    RejectSerializer,
)

TAG = ["quarantine"]
REVIEWED = {"POST": {409: "The item was already reviewed."}}


def _item(request: Request, slug: str, pk: int) -> QuarantineItem:
    collection = collection_for(request, slug, role="admin")
    items = quarantine_queue(request.user, status="", include_evaluation=True).filter(
        collection=collection
    )
    return object_or_404(items, pk=pk, what="quarantine item", collection=collection)


@extend_schema(
    tags=TAG,
    parameters=[
        OpenApiParameter(
            "status",
            str,
            enum=[*QuarantineItem.ReviewStatus.values, "all"],
            description="Review status to list (default: pending).",
        )
    ],
)
class QuarantineListView(generics.ListAPIView):
    """Items held for review, pending ones by default (``?status=approved|rejected|all``)."""

    serializer_class = QuarantineItemSerializer

    def get_queryset(self) -> QuerySet[QuarantineItem]:
        collection = collection_for(self.request, self.kwargs["slug"], role="admin")
        params = QuarantineFilterSerializer(data=self.request.query_params)
        params.is_valid(raise_exception=True)
        wanted = params.validated_data["status"]
        # The collection is named in the URL: its items are asked for, even an
        # evaluation collection's.
        items = quarantine_queue(
            self.request.user,
            status="" if wanted == "all" else wanted,
            include_evaluation=True,
        )
        return items.filter(collection=collection).order_by("-created_at", "-pk")


@extend_schema(tags=TAG)
class QuarantineDetailView(APIView):
    """One held item with its signals, excerpt and the full text a reviewer decides on."""

    @extend_schema(responses=QuarantineItemDetailSerializer, summary="Retrieve a quarantine item")
    def get(self, request: Request, slug: str, pk: int) -> Response:
        return Response(QuarantineItemDetailSerializer(_item(request, slug, pk)).data)


@extend_schema(tags=TAG)
class QuarantineApproveView(APIView):
    """Approve held content: exactly the text the reviewer saw is indexed."""

    schema_errors = REVIEWED

    @extend_schema(request=None, responses=ApprovalSerializer, summary="Approve an item")
    def post(self, request: Request, slug: str, pk: int) -> Response:
        item = _item(request, slug, pk)
        report = quarantine_approve(item=item, reviewer=request.user)
        item.refresh_from_db()
        return Response({"item": QuarantineItemSerializer(item).data, "report": report.as_dict()})


@extend_schema(tags=TAG)
class QuarantineRejectView(APIView):
    """Reject held content with a reason; it stays out of the index."""

    schema_errors = REVIEWED

    @extend_schema(
        request=RejectSerializer, responses=QuarantineItemSerializer, summary="Reject an item"
    )
    def post(self, request: Request, slug: str, pk: int) -> Response:
        item = _item(request, slug, pk)
        params = RejectSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        quarantine_reject(item=item, reviewer=request.user, reason=params.validated_data["reason"])
        item.refresh_from_db()
        return Response(QuarantineItemSerializer(item).data)


@extend_schema(tags=TAG)
class QuarantineBulkView(APIView):
    """Approve or reject many items at once; each item reports its own outcome."""

    @extend_schema(
        # BulkReviewSerializer reads the body; the schema states its two shapes.
        request=PolymorphicProxySerializer(
            component_name="BulkReview",
            serializers=[BulkApproveSerializer, BulkRejectSerializer],
            resource_type_field_name=None,
        ),
        responses=BulkResultSerializer,
        summary="Approve or reject several items",
    )
    def post(self, request: Request, slug: str) -> Response:
        collection = collection_for(request, slug, role="admin")
        params = BulkReviewSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        items = quarantine_queue(request.user, status="", include_evaluation=True).filter(
            collection=collection, pk__in=data["ids"]
        )
        outcomes = quarantine_review(
            items=items, reviewer=request.user, decision=data["action"], reason=data["reason"]
        )
        found = {outcome.item.pk for outcome in outcomes}
        results = [
            _outcome(
                outcome.item.pk,
                ok=not outcome.error,
                detail=outcome.error,
                status=outcome.item.review_status,
            )
            for outcome in outcomes
        ]
        results += [
            _outcome(pk, ok=False, detail="no such item in this collection")
            for pk in dict.fromkeys(data["ids"])
            if pk not in found
        ]
        return Response({"results": results})


def _outcome(pk: int, *, ok: bool, detail: str = "", status: str = "") -> dict[str, object]:
    return {"id": pk, "ok": ok, "review_status": status, "detail": detail}
