"""Collections and their members."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from collections_app.models import Collection
from collections_app.selectors import CollectionNotFound, collection_overviews
from collections_app.services import (
    CollectionExists,
    collection_create,
    collection_delete,
    membership_change,
)
from collections_app.services.collection import member_unavailable
from ragsite.api.access import collection_for
from ragsite.api.serializers import (
    COLLECTION_SCOPES,
    CollectionCreateSerializer,
    CollectionFilterSerializer,
    CollectionSerializer,
    CollectionUpdateSerializer,
    MemberRoleSerializer,
    MemberSerializer,
    MemberSetSerializer,
)

TAG = ["collections"]
LAST_ADMIN = "The change would leave the collection without an admin."


def _collection_with_stats(request: Request, slug: str) -> Any:
    # Asked for by slug: an evaluation collection is as reachable as any other.
    found = collection_overviews(request.user, include_evaluation=True).filter(slug=slug).first()
    if found is None:
        raise CollectionNotFound(f"no collection {slug!r}")
    return found


@extend_schema(tags=TAG)
class CollectionListView(generics.ListAPIView):
    """Collections the caller can read, with their source and chunk counts.

    The evaluation harness's collections are listed only with
    ``?purpose=evaluation`` (or ``all``).
    """

    serializer_class = CollectionSerializer

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "purpose",
                str,
                enum=COLLECTION_SCOPES,
                description="workspace (default): your collections; evaluation: the "
                "evaluation harness's corpora; all: both.",
            )
        ]
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Collection]:
        params = CollectionFilterSerializer(data=self.request.query_params)
        params.is_valid(raise_exception=True)
        wanted = params.validated_data["purpose"]
        found = collection_overviews(self.request.user, include_evaluation=wanted != "workspace")
        if wanted == "evaluation":
            found = found.filter(purpose=Collection.Purpose.EVALUATION)
        return found.order_by("name", "pk")

    @extend_schema(
        request=CollectionCreateSerializer,
        responses={201: CollectionSerializer},
        summary="Create a collection (the caller becomes its admin)",
    )
    def post(self, request: Request) -> Response:
        params = CollectionCreateSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        try:
            collection = collection_create(
                name=data["name"],
                slug=data.get("slug") or "",
                description=data["description"],
                chunking_strategy=data["chunking_strategy"],
                user=request.user,
            )
        except CollectionExists as exc:
            raise ValidationError({"slug": [str(exc)]}) from exc
        except ValueError as exc:
            raise ValidationError({"name": [str(exc)]}) from exc
        created = _collection_with_stats(request, collection.slug)
        return Response(
            CollectionSerializer(created, context={"request": request}).data,
            status=status.HTTP_201_CREATED,
        )


@extend_schema(tags=TAG)
class CollectionDetailView(APIView):
    """One collection: read (any role), update and delete (admin)."""

    @extend_schema(responses=CollectionSerializer, summary="Retrieve a collection")
    def get(self, request: Request, slug: str) -> Response:
        collection = _collection_with_stats(request, slug)
        return Response(CollectionSerializer(collection, context={"request": request}).data)

    @extend_schema(
        request=CollectionUpdateSerializer,
        responses=CollectionSerializer,
        summary="Rename or re-describe a collection (admin)",
    )
    def patch(self, request: Request, slug: str) -> Response:
        return self._update(request, slug, partial=True)

    @extend_schema(
        request=CollectionUpdateSerializer,
        responses=CollectionSerializer,
        summary="Replace a collection's name and description (admin)",
    )
    def put(self, request: Request, slug: str) -> Response:
        return self._update(request, slug, partial=False)

    def _update(self, request: Request, slug: str, *, partial: bool) -> Response:
        collection = collection_for(request, slug, role="admin")
        params = CollectionUpdateSerializer(data=request.data, partial=partial)
        params.is_valid(raise_exception=True)
        changed = dict(params.validated_data)
        if changed:
            # Plain single-row fields: the slug (the URL) and the embedding
            # profile are not editable here.
            for field, value in changed.items():
                setattr(collection, field, value)
            collection.save(update_fields=[*changed, "updated_at"])
        updated = _collection_with_stats(request, slug)
        return Response(CollectionSerializer(updated, context={"request": request}).data)

    @extend_schema(responses={204: None}, summary="Delete a collection and everything in it")
    def delete(self, request: Request, slug: str) -> Response:
        collection = collection_for(request, slug, role="admin")
        collection_delete(collection=collection)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=TAG)
class MemberListView(APIView):
    """Who may read, write or administer a collection (admin only)."""

    # Adding members names users: throttled so usernames cannot be probed in bulk.
    throttle_scope = "members"
    schema_errors = {"POST": {409: LAST_ADMIN}}

    @extend_schema(responses=MemberSerializer(many=True), summary="List members (admin)")
    def get(self, request: Request, slug: str) -> Response:
        collection = collection_for(request, slug, role="admin")
        members = collection.memberships.select_related("user").order_by("user__username")
        return Response(MemberSerializer(members, many=True).data)

    @extend_schema(
        request=MemberSetSerializer,
        responses=MemberSerializer(many=True),
        summary="Give a user a role (admin)",
    )
    def post(self, request: Request, slug: str) -> Response:
        collection = collection_for(request, slug, role="admin")
        params = MemberSetSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        membership_change(
            collection=collection,
            user=params.validated_data["username"],
            role=params.validated_data["role"],
        )
        members = collection.memberships.select_related("user").order_by("user__username")
        return Response(MemberSerializer(members, many=True).data)


@extend_schema(tags=TAG)
class MemberDetailView(APIView):
    """One member's role (admin only)."""

    throttle_scope = "members"
    schema_errors = {"PUT": {409: LAST_ADMIN}, "DELETE": {409: LAST_ADMIN}}

    def _member(self, request: Request, slug: str, username: str) -> tuple[Any, Any]:
        """The collection and the active user called ``username`` (None when there is none)."""
        collection = collection_for(request, slug, role="admin")
        if "\x00" in username:
            return collection, None  # PostgreSQL text cannot hold NUL: nobody is called that
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        return collection, user

    @extend_schema(
        request=MemberRoleSerializer, responses=MemberSerializer, summary="Set a role (admin)"
    )
    def put(self, request: Request, slug: str, username: str) -> Response:
        collection, user = self._member(request, slug, username)
        if user is None:
            raise NotFound(member_unavailable(username))
        params = MemberRoleSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        membership_change(collection=collection, user=user, role=params.validated_data["role"])
        membership = collection.memberships.select_related("user").get(user=user)
        return Response(MemberSerializer(membership).data)

    @extend_schema(responses={204: None}, summary="Remove a member (admin)")
    def delete(self, request: Request, slug: str, username: str) -> Response:
        collection, user = self._member(request, slug, username)
        # Whether the username exists or not, the answer is the same.
        if user is None or not collection.memberships.filter(user=user).exists():
            raise NotFound(f"{username!r} is not a member of collection {slug!r}")
        membership_change(collection=collection, user=user, role=None)
        return Response(status=status.HTTP_204_NO_CONTENT)
