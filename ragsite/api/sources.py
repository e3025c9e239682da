"""Sources of a collection (upload, add by URL or path, re-ingest, delete) and ingestion jobs."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, parsers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from collections_app.models import IngestionJob, Source
from collections_app.services import (
    Intake,
    QuotaExceeded,
    RefusedFile,
    ingestion_job_refresh,
    source_reingest,
    source_remove,
    uploads_accept,
    urls_accept,
)
from ragsite.api.access import (
    IDEMPOTENCY_HEADER,
    REQUEST_KEY_MAX_LENGTH,
    collection_for,
    object_or_404,
    request_key,
)
from ragsite.api.pagination import MAX_LIMIT, MAX_OFFSET, StrictLimitOffsetPagination
from ragsite.api.serializers import (
    ChunkSerializer,
    IngestionJobSerializer,
    JobStartedSerializer,
    LocationsSerializer,
    RefusedFileSerializer,
    SourceDetailSerializer,
    SourceSerializer,
    UploadResultSerializer,
    UploadSerializer,
)

IDEMPOTENCY_PARAMETER = OpenApiParameter(
    IDEMPOTENCY_HEADER,
    {"type": "string", "maxLength": REQUEST_KEY_MAX_LENGTH, "pattern": "^[ -~]*$"},
    OpenApiParameter.HEADER,
    description=(
        f"Any unique string (printable ASCII, at most {REQUEST_KEY_MAX_LENGTH} characters). "
        "Retrying a request with the same key within 10 minutes returns the first request's "
        "job instead of starting another."
    ),
)
SOURCES = ["sources"]
JOBS = ["ingestion jobs"]


def _nothing_accepted(refused: list[RefusedFile]) -> Exception:
    """The error when no location of a request could be added.

    Server paths from a user who is not a superuser, or outside the folders
    opened for them (RAG_INGEST_ROOTS), are a permission problem (403);
    anything else wrong with the addresses is bad input (400).
    """
    paths = [r for r in refused if r.code == "path"]
    if paths:
        return PermissionDenied("; ".join(r.reason for r in paths[:5]))
    return ValidationError({"locations": [r.reason for r in refused]})


def _quota_refused(exc: QuotaExceeded) -> Response:
    """429: the user's ingestion budget does not allow this (the message says which)."""
    return Response(
        {"detail": str(exc), "code": "quota_exceeded"}, status=status.HTTP_429_TOO_MANY_REQUESTS
    )


def _job_started(intake: Intake) -> Response:
    data = {
        "job": IngestionJobSerializer(intake.job).data,
        "created": intake.created,
        "refused": RefusedFileSerializer(intake.refused, many=True).data,
    }
    return Response(data, status=status.HTTP_202_ACCEPTED)


def _job_sources(job: IngestionJob | None) -> list[Source]:
    if job is None:
        return []
    ids = (job.request or {}).get("source_ids", [])
    return list(Source.objects.filter(collection_id=job.collection_id, pk__in=ids))


@extend_schema(tags=SOURCES)
class SourceListView(generics.ListAPIView):
    """A collection's sources with status, kind, size, chunk count, hash and error."""

    serializer_class = SourceSerializer

    def get_queryset(self) -> QuerySet[Source]:
        collection = collection_for(self.request, self.kwargs["slug"])
        return collection.sources.order_by("location", "pk")


@extend_schema(tags=SOURCES)
class SourceUploadView(APIView):
    """Upload one or many files; they are stored and ONE ingestion job starts (write role)."""

    parser_classes = [parsers.MultiPartParser, parsers.FormParser]
    throttle_scope = "upload"

    @extend_schema(
        request={"multipart/form-data": UploadSerializer},
        parameters=[IDEMPOTENCY_PARAMETER],
        responses={202: UploadResultSerializer},
        summary="Upload files and start an ingestion job",
        description=(
            "Files over the upload limit are refused, each with its reason, while the "
            "others are stored and ingested. When no file is accepted the answer is 400 "
            "(`code` nothing_accepted, with the fields of the 202 answer beside it)."
        ),
    )
    def post(self, request: Request, slug: str) -> Response:
        collection = collection_for(request, slug, role="write")
        key = request_key(request)
        params = UploadSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        try:
            intake = uploads_accept(
                collection=collection,
                files=params.validated_data["files"],
                user=request.user,
                chunking=params.validated_data["chunking"] or None,
                request_key=key,
            )
        except QuotaExceeded as exc:
            return _quota_refused(exc)
        data = {
            "job": IngestionJobSerializer(intake.job).data if intake.job else None,
            "sources": SourceSerializer(_job_sources(intake.job), many=True).data,
            "refused": RefusedFileSerializer(intake.refused, many=True).data,
            "replayed": intake.repeated,
        }
        if intake.job is None:
            reasons = "; ".join(r.reason for r in intake.refused)
            return Response(
                {"detail": f"no file was accepted: {reasons}", "code": "nothing_accepted", **data},
                status=status.HTTP_400_BAD_REQUEST,
            )
        return Response(data, status=status.HTTP_202_ACCEPTED)


@extend_schema(tags=SOURCES)
class SourceLocationsView(APIView):
    """Add web pages by URL (write role) or server paths and globs (superusers) via one job."""

    throttle_scope = "upload"

    @extend_schema(
        request=LocationsSerializer,
        parameters=[IDEMPOTENCY_PARAMETER],
        responses={202: JobStartedSerializer},
        summary="Add URLs or server paths and start an ingestion job",
        description=(
            "Each location is checked on its own: the acceptable ones start one job and "
            "every refused one is listed in `refused` with its reason. When none is "
            "acceptable the answer is 400 (403 for server paths from a user who is not a "
            "superuser, or outside the folders opened for them in RAG_INGEST_ROOTS)."
        ),
    )
    def post(self, request: Request, slug: str) -> Response:
        collection = collection_for(request, slug, role="write")
        key = request_key(request)
        params = LocationsSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        try:
            intake = urls_accept(
                collection=collection,
                urls=params.validated_data["locations"],
                user=request.user,
                chunking=params.validated_data["chunking"] or None,
                request_key=key,
                allow_paths=request.user.is_superuser,
            )
        except QuotaExceeded as exc:
            return _quota_refused(exc)
        if intake.job is None:
            raise _nothing_accepted(intake.refused)
        return _job_started(intake)


@extend_schema(tags=SOURCES)
class SourceDetailView(APIView):
    """One source with a page of its chunks (``?limit=&offset=``); delete it (write role)."""

    @extend_schema(
        responses=SourceDetailSerializer,
        parameters=[
            OpenApiParameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                description="Chunks per page (default 50).",
            ),
            OpenApiParameter(
                "offset",
                {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET},
                description="First chunk of the page.",
            ),
        ],
        summary="Retrieve a source with its chunks",
    )
    def get(self, request: Request, slug: str, pk: int) -> Response:
        collection = collection_for(request, slug)
        source = object_or_404(collection.sources, pk=pk, what="source", collection=collection)
        paginator = StrictLimitOffsetPagination()
        # The passages only: summary-tree nodes are not part of the document's text.
        passages = source.chunks.filter(kind="passage").order_by("ordinal")
        page = paginator.paginate_queryset(passages, request, view=self)
        data = dict(SourceSerializer(source).data)
        data["chunks"] = {
            "count": paginator.count,
            "next": paginator.get_next_link(),
            "previous": paginator.get_previous_link(),
            "results": ChunkSerializer(page, many=True).data,
        }
        return Response(data)

    @extend_schema(responses={204: None}, summary="Delete a source and its chunks")
    def delete(self, request: Request, slug: str, pk: int) -> Response:
        collection = collection_for(request, slug, role="write")
        source = object_or_404(collection.sources, pk=pk, what="source", collection=collection)
        source_remove(source=source)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=SOURCES)
class SourceReingestView(APIView):
    """Read one source again and ingest it if it changed (write role)."""

    throttle_scope = "upload"

    @extend_schema(
        request=None,
        parameters=[IDEMPOTENCY_PARAMETER],
        responses={202: JobStartedSerializer},
        summary="Re-ingest one source",
    )
    def post(self, request: Request, slug: str, pk: int) -> Response:
        collection = collection_for(request, slug, role="write")
        key = request_key(request)
        source = object_or_404(collection.sources, pk=pk, what="source", collection=collection)
        try:
            intake = source_reingest(source=source, user=request.user, request_key=key)
        except QuotaExceeded as exc:
            return _quota_refused(exc)
        return _job_started(intake)


@extend_schema(tags=JOBS)
class JobListView(generics.ListAPIView):
    """A collection's ingestion jobs, newest first."""

    serializer_class = IngestionJobSerializer

    def get_queryset(self) -> QuerySet[IngestionJob]:
        collection = collection_for(self.request, self.kwargs["slug"])
        return collection.jobs.select_related("collection", "created_by").order_by(
            "-created_at", "-pk"
        )


@extend_schema(tags=JOBS)
class JobDetailView(APIView):
    """One job's status, progress counts, percent, current step, report and error."""

    @extend_schema(responses=IngestionJobSerializer, summary="Retrieve an ingestion job")
    def get(self, request: Request, slug: str, pk: int) -> Response:
        collection = collection_for(request, slug)
        job = object_or_404(
            collection.jobs.select_related("collection", "created_by"),
            pk=pk,
            what="ingestion job",
            collection=collection,
        )
        # A job whose worker died is resumed (or failed) now, not shown running forever.
        return Response(IngestionJobSerializer(ingestion_job_refresh(job=job)).data)
