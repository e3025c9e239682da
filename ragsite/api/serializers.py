"""Serializers of the corpus side of the API: collections, members, sources, jobs, quarantine.

They only shape and check data; every write goes through a service.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from rest_framework import serializers

from collections_app.models import (
    Chunk,
    Collection,
    CollectionMembership,
    IngestionJob,
    QuarantineItem,
    Source,
)
from collections_app.selectors import user_role
from collections_app.services.collection import SLUG_UNAVAILABLE, member_unavailable
from ragsite.api.fields import RegistryNameField, StrictJsonSerializer

MAX_LOCATIONS = 1000


def _known_chunkers() -> list[str]:
    from collections_app.ingestion.chunking import CHUNKERS

    return sorted(CHUNKERS)


def _check_chunker(value: str) -> str:
    known = _known_chunkers()
    if value and value not in known:
        raise serializers.ValidationError(
            f"unknown chunking strategy {value!r}; known: {', '.join(known)}"
        )
    return value


# --- collections and members -------------------------------------------------------


class CollectionSerializer(serializers.ModelSerializer):
    source_count = serializers.IntegerField(read_only=True)
    chunk_count = serializers.IntegerField(read_only=True)
    role = serializers.SerializerMethodField(help_text="The caller's role: read, write or admin.")

    class Meta:
        model = Collection
        fields = [
            "slug",
            "name",
            "description",
            "purpose",
            "role",
            "source_count",
            "chunk_count",
            "chunking_strategy",
            "chunking_options",
            "embedding_provider",
            "embedding_model",
            "embedding_dimensions",
            "index_version",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_role(self, obj: Collection) -> str | None:
        request = self.context.get("request")
        return user_role(request.user, obj) if request is not None else None


class CollectionCreateSerializer(StrictJsonSerializer):
    name = serializers.CharField(max_length=200)
    slug = serializers.SlugField(
        max_length=100,
        required=False,
        allow_blank=True,
        help_text="Defaults to the slugified name.",
        error_messages={"invalid": SLUG_UNAVAILABLE},
    )
    description = serializers.CharField(required=False, allow_blank=True, default="")
    chunking_strategy = RegistryNameField(
        names=_known_chunkers, max_length=50, required=False, allow_blank=True, default=""
    )

    def validate_chunking_strategy(self, value: str) -> str:
        return _check_chunker(value)


class CollectionUpdateSerializer(StrictJsonSerializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(allow_blank=True, required=False)


class MemberSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.get_username", read_only=True)

    class Meta:
        model = CollectionMembership
        fields = ["username", "role"]


class MemberSetSerializer(StrictJsonSerializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=CollectionMembership.Role.choices)

    def validate_username(self, value: str) -> Any:
        user = get_user_model().objects.filter(username=value, is_active=True).first()
        if user is None:
            # The same words for a username nobody has and an inactive account.
            raise serializers.ValidationError(member_unavailable(value))
        return user


class MemberRoleSerializer(StrictJsonSerializer):
    role = serializers.ChoiceField(choices=CollectionMembership.Role.choices)


# --- sources and chunks ---------------------------------------------------------------


class SourceSerializer(serializers.ModelSerializer):
    name = serializers.CharField(source="display_name", read_only=True)

    class Meta:
        model = Source
        fields = [
            "id",
            "name",
            "location",
            "origin",
            "kind",
            "mime",
            "title",
            "status",
            "size_bytes",
            "text_chars",
            "chunk_count",
            "content_hash",
            "error",
            "ingested_at",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class ChunkSerializer(serializers.ModelSerializer):
    class Meta:
        model = Chunk
        fields = [
            "id",
            "ordinal",
            "text",
            "char_start",
            "char_end",
            "page",
            "section_path",
            "token_count",
        ]
        read_only_fields = fields


class ChunkPageSerializer(serializers.Serializer):
    """One page of a source's chunks (``?limit=&offset=``)."""

    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = ChunkSerializer(many=True)


class SourceDetailSerializer(SourceSerializer):
    chunks = ChunkPageSerializer(read_only=True)

    class Meta(SourceSerializer.Meta):
        fields = [*SourceSerializer.Meta.fields, "chunks"]
        read_only_fields = fields


class UploadSerializer(serializers.Serializer):
    files = serializers.ListField(
        child=serializers.FileField(allow_empty_file=True, use_url=False),
        allow_empty=False,
        help_text="One or many files (repeat the multipart field).",
        error_messages={"empty": "send at least one file in the 'files' field"},
    )
    chunking = RegistryNameField(
        names=_known_chunkers, max_length=50, required=False, allow_blank=True, default=""
    )

    def validate_chunking(self, value: str) -> str:
        return _check_chunker(value)


class LocationsSerializer(StrictJsonSerializer):
    locations = serializers.ListField(
        child=serializers.CharField(max_length=4000),
        allow_empty=False,
        max_length=MAX_LOCATIONS,
        help_text=(
            "http(s) URLs (write role), or server paths, directories and globs (superusers "
            "only, inside the folders in RAG_INGEST_ROOTS)."
        ),
    )
    chunking = RegistryNameField(
        names=_known_chunkers, max_length=50, required=False, allow_blank=True, default=""
    )

    def validate_chunking(self, value: str) -> str:
        return _check_chunker(value)


# --- ingestion jobs ----------------------------------------------------------------------


class IngestionJobSerializer(serializers.ModelSerializer):
    percent = serializers.IntegerField(read_only=True)
    is_finished = serializers.BooleanField(read_only=True)
    collection = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    created_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = IngestionJob
        fields = [
            "id",
            "collection",
            "status",
            "is_finished",
            "percent",
            "sources_total",
            "sources_done",
            "sources_failed",
            "chunks_written",
            "embeddings_computed",
            "parts_total",
            "parts_done",
            "parts_failed",
            "current",
            "report",
            "error",
            "request",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
            "attempts",
            "heartbeat_at",
        ]
        read_only_fields = fields


class RefusedFileSerializer(serializers.Serializer):
    name = serializers.CharField()
    reason = serializers.CharField()


class UploadResultSerializer(serializers.Serializer):
    job = IngestionJobSerializer(allow_null=True)
    sources = SourceSerializer(many=True)
    refused = RefusedFileSerializer(many=True)
    replayed = serializers.BooleanField(
        help_text="True when an earlier request with the same Idempotency-Key made this job."
    )


class JobStartedSerializer(serializers.Serializer):
    job = IngestionJobSerializer()
    created = serializers.BooleanField(
        help_text="False when an earlier request with the same Idempotency-Key made this job."
    )
    refused = RefusedFileSerializer(
        many=True, required=False, help_text="Locations that were not accepted, with the reason."
    )


# --- quarantine ----------------------------------------------------------------------------


class QuarantineSourceSerializer(serializers.ModelSerializer):
    class Meta:
        model = Source
        fields = ["id", "location", "title", "status"]
        read_only_fields = fields


class QuarantineItemSerializer(serializers.ModelSerializer):
    source = QuarantineSourceSerializer(read_only=True)
    reviewer = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = QuarantineItem
        fields = [
            "id",
            "source",
            "verdict",
            "signals",
            "excerpt",
            "indexed",
            "review_status",
            "reviewer",
            "reviewed_at",
            "reason",
            "content_hash",
            "created_at",
        ]
        read_only_fields = fields


class QuarantineItemDetailSerializer(QuarantineItemSerializer):
    text = serializers.CharField(
        source="source.text", read_only=True, help_text="The text a reviewer approves or rejects."
    )

    class Meta(QuarantineItemSerializer.Meta):
        fields = [*QuarantineItemSerializer.Meta.fields, "text"]
        read_only_fields = fields


COLLECTION_SCOPES = ["workspace", "evaluation", "all"]


class CollectionFilterSerializer(serializers.Serializer):
    purpose = serializers.ChoiceField(
        choices=COLLECTION_SCOPES, default="workspace", required=False
    )


class QuarantineFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=[*QuarantineItem.ReviewStatus.values, "all"], default="pending", required=False
    )


REASON_MESSAGES = {
    "required": "a rejection needs a reason",
    "blank": "a rejection needs a reason",
}


class RejectSerializer(StrictJsonSerializer):
    reason = serializers.CharField(max_length=2000, error_messages=REASON_MESSAGES)


class ApprovalSerializer(serializers.Serializer):
    item = QuarantineItemSerializer()
    report = serializers.JSONField(help_text="The ingestion report of the approved content.")


class BulkReviewSerializer(StrictJsonSerializer):
    action = serializers.ChoiceField(choices=["approve", "reject"])
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**31 - 1),
        allow_empty=False,
        min_length=1,
        max_length=1000,
    )
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["action"] == "reject" and not attrs["reason"].strip():
            raise serializers.ValidationError({"reason": REASON_MESSAGES["required"]})
        return attrs


class BulkApproveSerializer(serializers.Serializer):
    """The schema's first shape of a bulk review: approving (a reason is optional)."""

    action = serializers.ChoiceField(choices=["approve"])
    ids = BulkReviewSerializer().fields["ids"]
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True)


class BulkRejectSerializer(serializers.Serializer):
    """The schema's second shape of a bulk review: rejecting, with a reason."""

    action = serializers.ChoiceField(choices=["reject"])
    ids = BulkReviewSerializer().fields["ids"]
    reason = serializers.CharField(max_length=2000)


class BulkOutcomeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    ok = serializers.BooleanField()
    review_status = serializers.CharField(allow_blank=True)
    detail = serializers.CharField(allow_blank=True)


class BulkResultSerializer(serializers.Serializer):
    results = BulkOutcomeSerializer(many=True)
