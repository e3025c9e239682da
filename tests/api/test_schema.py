"""The OpenAPI schema and its documentation pages."""

from __future__ import annotations

import pytest
import yaml
from django.core.management import call_command
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

ENDPOINTS = {
    "/api/auth/token": {"post"},
    "/api/collections": {"get", "post"},
    "/api/collections/{slug}": {"get", "put", "patch", "delete"},
    "/api/collections/{slug}/members": {"get", "post"},
    "/api/collections/{slug}/members/{username}": {"put", "delete"},
    "/api/collections/{slug}/sources": {"get"},
    "/api/collections/{slug}/sources/upload": {"post"},
    "/api/collections/{slug}/sources/locations": {"post"},
    "/api/collections/{slug}/sources/{id}": {"get", "delete"},
    "/api/collections/{slug}/sources/{id}/reingest": {"post"},
    "/api/collections/{slug}/jobs": {"get"},
    "/api/collections/{slug}/jobs/{id}": {"get"},
    "/api/collections/{slug}/quarantine": {"get"},
    "/api/collections/{slug}/quarantine/bulk": {"post"},
    "/api/collections/{slug}/quarantine/{id}": {"get"},
    "/api/collections/{slug}/quarantine/{id}/approve": {"post"},
    "/api/collections/{slug}/quarantine/{id}/reject": {"post"},
    "/api/collections/{slug}/query": {"post"},
    "/api/collections/{slug}/retrieve": {"post"},
    "/api/query-runs": {"get"},
    "/api/query-runs/{id}": {"get"},
}


def test_schema_validates_without_warnings_and_lists_every_endpoint(tmp_path):
    out = tmp_path / "schema.yaml"
    # --fail-on-warn turns any schema-generation warning into an error.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    paths = schema["paths"]
    for path, methods in ENDPOINTS.items():
        assert path in paths, path
        assert methods <= set(paths[path]), (path, set(paths[path]))
    upload = paths["/api/collections/{slug}/sources/upload"]["post"]
    assert "multipart/form-data" in upload["requestBody"]["content"]
    assert "tokenAuth" in schema["components"]["securitySchemes"]


def test_schema_and_docs_are_served_to_signed_in_users(user):
    """Anonymous visitors get neither unless RAG_API_DOCS_PUBLIC (tests/api/test_hardening.py)."""
    client = APIClient()
    client.force_authenticate(user)
    assert client.get("/api/schema/").status_code == 200
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger" in docs.content.lower()
    # Served from the installed sidecar package, so the page works offline.
    assert b"drf_spectacular_sidecar" in docs.content
    assert b"cdn.jsdelivr" not in docs.content
    assert client.get("/api/docs/redoc/").status_code == 200
