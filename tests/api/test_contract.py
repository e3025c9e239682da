"""The OpenAPI schema says exactly what the API does: Schemathesis finds no difference.

Schemathesis (its pytest integration) loads the schema from the WSGI app, as a
signed-in user would, and sends every operation requests it generates from the
schema, in-process: valid ones and ones the schema forbids. All of its checks
run: no 5xx, only declared status codes and media types, bodies matching their
schemas, valid requests accepted, invalid ones refused, required headers and
unsupported methods answered as they should. The path parameters name real
rows (a collection, a source, a job, quarantine items, members), so the
operations reach their views, not only their 404s. The examples are bounded and
the generation deterministic (derandomized, seed 15), so a run is reproducible.

A second pass sends every operation without credentials: each answers 401 (or
404 for a path naming nothing), never anything else.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck
from rest_framework.authtoken.models import Token

from collections_app.models import IngestionJob, QuarantineItem
from collections_app.services import collection_create, membership_set
from query_app.services import QueryRequest, query_answer
from tests.support.documents import INSTALL, PLAIN_INJECTION, REFUNDS, upload

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_chat_model")]

SEED = 15
MAX_EXAMPLES = 6

# The project's Schemathesis settings (NUL-free strings; the operations whose valid-looking
# requests a rule outside the schema can refuse with a 400, each with its reason).
PROJECT_CONFIG = tomllib.loads(
    (Path(__file__).resolve().parents[2] / "schemathesis.toml").read_text()
)


def _config(ids: dict[str, Any], **more: Any) -> schemathesis.Config:
    """All checks, bounded and reproducible; path parameters naming the fixtures' rows."""

    def operation(method: str, path: str, **parameters: Any) -> dict[str, Any]:
        return {"include-method": method, "include-path": path, "parameters": parameters}

    collection = "/api/collections/{slug}"
    operations = [
        # Destructive operations get rows of their own, so the others keep theirs.
        operation("DELETE", collection, slug="spare"),
        operation("DELETE", f"{collection}/sources/{{id}}", id=ids["spare_source"]),
        operation("DELETE", f"{collection}/members/{{username}}", username="dave"),
        operation("PUT", f"{collection}/members/{{username}}", username="bob"),
        operation("POST", f"{collection}/quarantine/{{id}}/approve", id=ids["held"][0]),
        operation("POST", f"{collection}/quarantine/{{id}}/reject", id=ids["held"][1]),
        operation("GET", f"{collection}/quarantine/{{id}}", id=ids["held"][0]),
        operation("GET", f"{collection}/jobs/{{id}}", id=ids["job"]),
        operation("GET", "/api/query-runs/{id}", id=ids["run"]),
        *PROJECT_CONFIG["operations"],
    ]
    return schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "generation": {
                **PROJECT_CONFIG["generation"],
                "max-examples": MAX_EXAMPLES,
                "deterministic": True,
            },
            "parameters": {"slug": "docs", "id": ids["source"]},
            "operations": operations,
            **more,
        }
    )


@pytest.fixture
def api_rows(
    api,
    user,
    other_user,
    django_user_model,
    media_root,
    celery_eager,
    django_capture_on_commit_callbacks,
):  # type: ignore[no-untyped-def]
    """alice's collection ``docs`` with two sources, a job, two held items, members and a run."""
    collection = collection_create(name="Docs", slug="docs", user=user)
    collection_create(name="Spare", slug="spare", user=user)
    membership_set(collection=collection, user=other_user, role="read")
    dave = django_user_model.objects.create_user(username="dave", password="pw-dave")
    membership_set(collection=collection, user=dave, role="write")
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            "/api/collections/docs/sources/upload",
            {
                "files": [
                    upload("install.md", INSTALL),
                    upload("refunds.md", REFUNDS),
                    upload("notes.md", PLAIN_INJECTION),
                    upload("notes-2.md", PLAIN_INJECTION.replace("dark", "light")),
                ]
            },
            format="multipart",
        )
    assert response.status_code == 202, response.content
    sources = {s["name"]: s["id"] for s in response.json()["sources"]}
    # Stored at once (the API's runs are written by a thread, outside this test's transaction).
    run = query_answer(user=user, request=QueryRequest(collection=collection, question="refunds"))
    held = QuarantineItem.objects.filter(collection=collection).order_by("pk")
    return {
        "source": sources["install.md"],
        "spare_source": sources["refunds.md"],
        "held": [item.pk for item in held],
        "job": IngestionJob.objects.get(collection=collection).pk,
        "run": run.pk,
    }


@pytest.fixture
def wsgi_in_test_transaction() -> Iterator[None]:
    """Requests through the WSGI app keep the test's connection, as Django's test client does.

    Django closes old connections as each request starts and ends; inside the
    test's transaction that would close the one connection the test runs on.
    """
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def api_schema(api_rows, user, wsgi_in_test_transaction, monkeypatch):  # type: ignore[no-untyped-def]
    # Schemathesis 4.32.5 renames the test after each operation through pytest's
    # private Node._nodeid, which pytest 9.2 no longer has (it keeps Node._id):
    # read the node id, ignore the renaming.
    monkeypatch.setattr(
        pytest.Function,
        "_nodeid",
        property(lambda node: node.nodeid, lambda node, value: None),
        raising=False,
    )
    return schemathesis.openapi.from_wsgi(
        "/api/schema/?format=json",
        get_wsgi_application(),
        config=_config(api_rows),
        headers=_credentials(user),
    )


def _credentials(user) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {"Authorization": f"Token {Token.objects.get_or_create(user=user)[0].key}"}


@pytest.fixture
def anonymous_schema(api_schema, api_rows):  # type: ignore[no-untyped-def]
    """The same schema, generated requests only (no coverage phase): the answer is always 401."""
    config = _config(api_rows, phases={"coverage": {"enabled": False}})
    anonymous = schemathesis.openapi.from_dict(api_schema.raw_schema, config=config)
    anonymous.app = api_schema.app
    return anonymous


schema = schemathesis.pytest.from_fixture("api_schema")
anonymous = schemathesis.pytest.from_fixture("anonymous_schema")

SETTINGS = hypothesis.settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@schema.parametrize()
@SETTINGS
def test_every_operation_does_what_the_schema_says(case, user):  # type: ignore[no-untyped-def]
    case.call_and_validate(headers=_credentials(user))


@anonymous.exclude(path="/api/auth/token").parametrize()
@hypothesis.settings(SETTINGS, max_examples=2)
def test_without_credentials_every_operation_answers_401_or_404(case):  # type: ignore[no-untyped-def]
    """The token endpoint is the one way in, so it is left out: it is meant to be public."""
    case.headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
    response = case.call()
    assert response.status_code in (401, 404), (case.method, case.formatted_path, response.text)
    assert response.headers["content-type"][0].startswith("application/json")
    assert response.json()["code"] in ("not_authenticated", "authentication_failed", "not_found")
