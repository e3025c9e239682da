"""``rag demo``: the local demo login and the demo collection (local use only)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from collections_app.ingestion.types import IngestionError
from collections_app.models import Collection, CollectionMembership
from collections_app.services import (
    collection_create,
    ingestion_job_create,
    ingestion_job_execute,
)

DEMO_CORPUS = settings.BASE_DIR / "demo_corpus"


def demo_setup() -> dict[str, Any]:
    """Create user demo/demo and collection ``demo``, ingest the demo corpus (incrementally).

    The ingestion runs as a recorded job, so the collection page shows it.
    """
    users = get_user_model()
    user = users.objects.filter(username="demo").first()
    if user is None:
        user = users.objects.create_superuser(username="demo", email="", password="demo")
    collection = Collection.objects.filter(slug="demo").first()
    if collection is None:
        collection = collection_create(
            name="Demo", slug="demo", description="ragsite's own user guide", user=user
        )
    CollectionMembership.objects.get_or_create(
        collection=collection, user=user, defaults={"role": CollectionMembership.Role.ADMIN}
    )
    # Through a recorded job, like every other ingestion: the collection page
    # shows it (and its report) under "Ingestion jobs".
    job, _ = ingestion_job_create(collection=collection, user=user, locations=[str(DEMO_CORPUS)])
    report = ingestion_job_execute(job=job)
    assert report is not None  # a job just created is never finished already
    return report.as_dict()


def add_demo_arguments(parser: CommandParser) -> None:
    parser.add_argument("--json", dest="as_json", action="store_true")


def handle_demo(command: BaseCommand, **options: Any) -> None:
    try:
        data = demo_setup()
    except IngestionError as exc:
        raise CommandError(str(exc), returncode=2) from exc
    command.stdout.write(
        f"demo collection: {data['sources_ingested']} ingested, "
        f"{data['sources_unchanged']} unchanged, {data['sources_failed']} failed, "
        f"{data['embeddings_computed']} embeddings computed. Log in as demo / demo."
    )
    if data["sources_failed"]:
        raise CommandError("some demo documents failed to ingest", returncode=1)


ACTIONS = {"demo": ("Create the local demo login and collection.", add_demo_arguments, handle_demo)}
