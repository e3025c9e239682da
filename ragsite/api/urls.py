"""Routes of the REST API (mounted under ``/api/``), its OpenAPI schema and docs."""

from __future__ import annotations

from django.urls import path, register_converter
from drf_spectacular.views import SpectacularAPIView

from ragsite.api import collections, quarantine, query, sources
from ragsite.api.auth import TokenView
from ragsite.api.docs import RedocDocsView, SwaggerDocsView

app_name = "api"


class IdConverter:
    """A row id: digits that fit PostgreSQL's integer; anything larger matches no route (404)."""

    regex = "[0-9]{1,10}"

    def to_python(self, value: str) -> int:
        if int(value) > 2**31 - 1:
            raise ValueError(value)
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(IdConverter, "id")

COLLECTION = "collections/<slug:slug>"

urlpatterns = [
    path("auth/token", TokenView.as_view(), name="token"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path(
        "docs/",
        SwaggerDocsView.as_view(url_name="api:schema", template_name="ragsite/api_docs.html"),
        name="docs",
    ),
    path("docs/redoc/", RedocDocsView.as_view(url_name="api:schema"), name="redoc"),
    # collections and members
    path("collections", collections.CollectionListView.as_view(), name="collections"),
    path(COLLECTION, collections.CollectionDetailView.as_view(), name="collection"),
    path(f"{COLLECTION}/members", collections.MemberListView.as_view(), name="members"),
    path(
        f"{COLLECTION}/members/<str:username>",
        collections.MemberDetailView.as_view(),
        name="member",
    ),
    # sources and ingestion jobs
    path(f"{COLLECTION}/sources", sources.SourceListView.as_view(), name="sources"),
    path(f"{COLLECTION}/sources/upload", sources.SourceUploadView.as_view(), name="upload"),
    path(
        f"{COLLECTION}/sources/locations",
        sources.SourceLocationsView.as_view(),
        name="locations",
    ),
    path(f"{COLLECTION}/sources/<id:pk>", sources.SourceDetailView.as_view(), name="source"),
    path(
        f"{COLLECTION}/sources/<id:pk>/reingest",
        sources.SourceReingestView.as_view(),
        name="reingest",
    ),
    path(f"{COLLECTION}/jobs", sources.JobListView.as_view(), name="jobs"),
    path(f"{COLLECTION}/jobs/<id:pk>", sources.JobDetailView.as_view(), name="job"),
    # quarantine
    path(f"{COLLECTION}/quarantine", quarantine.QuarantineListView.as_view(), name="quarantine"),
    path(
        f"{COLLECTION}/quarantine/bulk",
        quarantine.QuarantineBulkView.as_view(),
        name="quarantine-bulk",
    ),
    path(
        f"{COLLECTION}/quarantine/<id:pk>",
        quarantine.QuarantineDetailView.as_view(),
        name="quarantine-item",
    ),
    path(
        f"{COLLECTION}/quarantine/<id:pk>/approve",
        quarantine.QuarantineApproveView.as_view(),
        name="quarantine-approve",
    ),
    path(
        f"{COLLECTION}/quarantine/<id:pk>/reject",
        quarantine.QuarantineRejectView.as_view(),
        name="quarantine-reject",
    ),
    # answering
    path(f"{COLLECTION}/query", query.QueryView.as_view(), name="query"),
    path(f"{COLLECTION}/retrieve", query.RetrieveView.as_view(), name="retrieve"),
    path("query-runs", query.QueryRunListView.as_view(), name="query-runs"),
    path("query-runs/<id:pk>", query.QueryRunDetailView.as_view(), name="query-run"),
]
