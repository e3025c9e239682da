"""``rag ingest``: ingest paths, globs, directories and URLs into a collection.

The command is the local operator: it may name any path the process can read
(the web and the API are limited to ``RAG_INGEST_ROOTS``, see
``collections_app.ingestion.server_paths``) and has no quota.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from collections_app.ingestion.types import IngestionError
from collections_app.models import Collection
from collections_app.services import (
    CollectionExists,
    collection_create,
    ingestion_job_create,
    ingestion_job_enqueue,
    ingestion_job_execute,
)


def add_ingest_arguments(parser: CommandParser) -> None:
    parser.add_argument("sources", nargs="+", metavar="SOURCE", help="file, directory, glob or URL")
    parser.add_argument("--collection", required=True, help="collection slug")
    parser.add_argument("--create", action="store_true", help="create the collection if missing")
    parser.add_argument("--chunking", help="chunking strategy (recursive, sentence, ...)")
    parser.add_argument("--reindex", action="store_true", help="re-embed every source")
    parser.add_argument("--async", dest="run_async", action="store_true", help="run on a worker")
    parser.add_argument("--json", dest="as_json", action="store_true", help="print one JSON object")


def handle_ingest(command: BaseCommand, **options: Any) -> None:
    slug = options["collection"]
    collection = Collection.objects.filter(slug=slug).first()
    try:
        if collection is None:
            if not options["create"]:
                raise CommandError(
                    f"no collection {slug!r}; pass --create to create it", returncode=2
                )
            collection = collection_create(
                name=slug, slug=slug, chunking_strategy=options.get("chunking") or ""
            )
        if options["chunking"]:
            # Fail before enqueueing anything when the name is unknown.
            from collections_app.ingestion.chunking import CHUNKERS

            CHUNKERS.get(options["chunking"])
        if options["run_async"]:
            job, _ = ingestion_job_enqueue(
                collection=collection,
                locations=options["sources"],
                chunking=options["chunking"],
                reindex=options["reindex"],
                operator=True,
            )
            if options["as_json"]:
                command.stdout.write(json.dumps({"job_id": job.pk, "status": job.status}))
            else:
                command.stdout.write(f"queued ingestion job {job.pk}")
            return
        job, _ = ingestion_job_create(
            collection=collection,
            locations=options["sources"],
            chunking=options["chunking"],
            reindex=options["reindex"],
            operator=True,
            foreground=True,
        )
        report = ingestion_job_execute(job=job)
    except (IngestionError, CollectionExists, ValueError) as exc:
        raise CommandError(str(exc), returncode=2) from exc
    assert report is not None
    if options["as_json"]:
        data = report.as_dict()
        data["job_id"] = job.pk
        command.stdout.write(json.dumps(data))
    else:
        command.stdout.write(report.as_text())
    if report.sources_failed:
        raise CommandError(f"{report.sources_failed} source(s) failed", returncode=1)


ACTIONS = {
    "ingest": ("Ingest documents into a collection.", add_ingest_arguments, handle_ingest),
}
