"""Mark the collections the evaluation harness built as evaluation collections.

Until collections had a purpose, the harness's collections sat in the workspace
(the collection list, the Ask picker, the quarantine queue). They are the ones a
run points at, and those the harness named itself: slug ``eval-<dataset>`` and
name ``Evaluation: <dataset>`` (a person's own ``eval-…`` collection stays put).
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.models import Q

EVALUATION = "evaluation"
WORKSPACE = "workspace"


def _harness_collections(apps: Any) -> Any:
    collection_model = apps.get_model("collections_app", "Collection")
    run_model = apps.get_model("eval_app", "EvalRun")
    used_by_runs = run_model.objects.exclude(collection=None).values("collection_id")
    return collection_model.objects.filter(
        Q(pk__in=used_by_runs) | Q(slug__startswith="eval-", name__startswith="Evaluation: ")
    )


def mark(apps: Any, schema_editor: Any) -> None:
    _harness_collections(apps).update(purpose=EVALUATION)


def unmark(apps: Any, schema_editor: Any) -> None:
    _harness_collections(apps).update(purpose=WORKSPACE)


class Migration(migrations.Migration):
    dependencies = [
        ("eval_app", "0001_initial"),
        ("collections_app", "0002_collection_purpose"),
    ]

    operations = [migrations.RunPython(mark, unmark)]
