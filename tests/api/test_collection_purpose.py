"""The API lists the evaluation harness's collections only when asked (``?purpose=``)."""

from __future__ import annotations

import pytest

from collections_app.models import Collection, QuarantineItem
from collections_app.services import collection_create, collection_ingest
from tests.support.documents import PLAIN_INJECTION

pytestmark = pytest.mark.django_db


@pytest.fixture
def evaluation(user, tmp_path) -> Collection:
    """An evaluation collection alice administers, with a planted instruction held."""
    collection = collection_create(
        name="Evaluation: golden",
        slug="eval-golden",
        user=user,
        purpose=Collection.Purpose.EVALUATION,
    )
    (tmp_path / "release.md").write_text(PLAIN_INJECTION)
    collection_ingest(collection=collection, locations=[str(tmp_path / "release.md")])
    return collection


def _slugs(response) -> list[str]:  # type: ignore[no-untyped-def]
    assert response.status_code == 200, response.content
    body = response.json()
    rows = body["results"] if isinstance(body, dict) else body
    return [row["slug"] for row in rows]


def test_the_list_holds_workspace_collections_by_default(api, collection, evaluation):
    assert _slugs(api.get("/api/collections")) == ["docs"]
    assert _slugs(api.get("/api/collections?purpose=workspace")) == ["docs"]


def test_evaluation_collections_are_listed_when_asked_for(api, collection, evaluation):
    assert _slugs(api.get("/api/collections?purpose=evaluation")) == ["eval-golden"]
    assert _slugs(api.get("/api/collections?purpose=all")) == ["docs", "eval-golden"]
    row = api.get("/api/collections?purpose=evaluation").json()
    rows = row["results"] if isinstance(row, dict) else row
    assert rows[0]["purpose"] == "evaluation"


def test_an_unknown_purpose_is_a_clear_400(api, collection):
    response = api.get("/api/collections?purpose=secret")
    assert response.status_code == 400
    assert "purpose" in response.content.decode()


def test_an_evaluation_collection_and_its_quarantine_stay_reachable_by_slug(api, evaluation):
    detail = api.get("/api/collections/eval-golden")
    assert detail.status_code == 200
    assert detail.json()["purpose"] == "evaluation"
    held = api.get("/api/collections/eval-golden/quarantine")
    assert held.status_code == 200
    body = held.json()
    rows = body["results"] if isinstance(body, dict) else body
    item = QuarantineItem.objects.get(collection=evaluation)
    assert [row["id"] for row in rows] == [item.pk]
