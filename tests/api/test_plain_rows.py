"""The reads every request makes, as plain statements (ragsite/rows.py): the
caller's collection and role, and the API token's user, equal what the ORM reads.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from collections_app.models import Collection, CollectionMembership
from collections_app.selectors import CollectionNotFound, collection_and_role_for_user
from ragsite.rows import model_columns

pytestmark = pytest.mark.django_db


def _fields(instance: object) -> dict[str, object]:
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


def test_the_collection_read_equals_the_orms_json_fields_parsed(user, other_user, collection):
    collection.embedding_config = {"model": "m", "dimensions": 384, "nested": {"a": [1, 2]}}
    collection.keyword_stats = {"n_docs": 12, "avgdl": 41.5}
    collection.save()
    CollectionMembership.objects.create(
        collection=collection, user=other_user, role=CollectionMembership.Role.WRITE
    )
    with CaptureQueriesContext(connection) as read:
        found, role = collection_and_role_for_user(other_user, slug="docs", role="write")
    assert len(read.captured_queries) == 1
    assert role == "write"
    assert _fields(found) == _fields(Collection.objects.get(pk=collection.pk))
    assert found.embedding_config["nested"] == {"a": [1, 2]}  # parsed, not its text
    # A stored row: saving it updates, it does not insert a second collection.
    assert found._state.adding is False and found._state.db == "default"
    found.name = "Renamed"
    found.save()
    assert Collection.objects.filter(slug="docs").get().name == "Renamed"


def test_a_role_below_the_one_asked_for_is_not_found(user, other_user, collection):
    CollectionMembership.objects.create(
        collection=collection, user=other_user, role=CollectionMembership.Role.READ
    )
    assert collection_and_role_for_user(other_user, slug="docs")[1] == "read"
    with pytest.raises(CollectionNotFound):
        collection_and_role_for_user(other_user, slug="docs", role="write")
    with pytest.raises(CollectionNotFound):
        collection_and_role_for_user(other_user, slug="nowhere")


def test_model_columns_read_every_concrete_field_in_order(user):
    users = type(user)
    columns = model_columns(users, "u")
    assert columns.count == len(users._meta.concrete_fields)
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT {columns.select}, 'extra' FROM {users._meta.db_table} u WHERE u.id = %s",
            [user.pk],
        )
        row = cur.fetchone()
    read = columns.instance(row)
    assert _fields(read) == _fields(users.objects.get(pk=user.pk))
    assert row[columns.count] == "extra"  # what follows the model's columns is the caller's
