"""Evaluation corpora live in their own namespace: the "evaluation" purpose.

The harness creates its collection with that purpose and never ingests into a
person's collection that happens to hold its slug; the data migration marks the
collections the harness built before collections had a purpose.
"""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from collections_app.models import Collection
from collections_app.services import collection_create
from eval_app.harness import eval_run_create, eval_run_execute
from eval_app.harness.corpus_ingest import eval_collection_get_or_create

pytestmark = pytest.mark.django_db

MIGRATION = importlib.import_module("eval_app.migrations.0002_mark_evaluation_collections")


def test_a_run_builds_and_reuses_one_evaluation_collection(tiny_dataset):
    first = eval_run_execute(
        run=eval_run_create(dataset_path=tiny_dataset, compare="fast", offline=True)
    )
    second = eval_run_execute(
        run=eval_run_create(dataset_path=tiny_dataset, compare="fast", offline=True)
    )
    assert first.collection == second.collection
    assert first.collection.slug == "eval-tiny-eval"
    assert first.collection.purpose == Collection.Purpose.EVALUATION
    assert first.collection.memberships.count() == 0


def test_a_workspace_collection_holding_the_slug_is_left_alone(user):
    mine = collection_create(name="My eval notes", slug="eval-golden", user=user)

    built = eval_collection_get_or_create(dataset_name="golden")

    assert built.slug == "eval-golden-2"
    assert built.purpose == Collection.Purpose.EVALUATION
    assert eval_collection_get_or_create(dataset_name="golden") == built
    mine.refresh_from_db()
    assert mine.purpose == Collection.Purpose.WORKSPACE
    assert mine.name == "My eval notes"


def test_the_migration_marks_the_collections_the_harness_built(user, tiny_dataset):
    run = eval_run_execute(
        run=eval_run_create(dataset_path=tiny_dataset, compare="fast", offline=True)
    )
    named = collection_create(name="Evaluation: old-set", slug="eval-old-set")
    personal = collection_create(name="Eval ideas", slug="eval-ideas", user=user)
    ordinary = collection_create(name="Handbook", slug="handbook", user=user)
    # As they were before collections had a purpose.
    Collection.objects.update(purpose=Collection.Purpose.WORKSPACE)

    MIGRATION.mark(apps, None)

    purposes = dict(Collection.objects.values_list("slug", "purpose"))
    assert purposes == {
        run.collection.slug: "evaluation",
        named.slug: "evaluation",
        personal.slug: "workspace",
        ordinary.slug: "workspace",
    }
    MIGRATION.unmark(apps, None)
    assert set(Collection.objects.values_list("purpose", flat=True)) == {"workspace"}
