"""Uploads, URLs, job progress and source pages."""

from __future__ import annotations

import html

import pytest
from django.test import Client

from collections_app.models import Chunk, IngestionJob, Source
from tests.support.clients import request_key_of
from tests.support.documents import HOSTILE, INSTALL, REFUNDS, upload
from tests.support.sample_files import docx_bytes, docx_paragraph, pdf_bytes

pytestmark = pytest.mark.django_db

UPLOAD = "/collections/handbook/upload/"


def post_upload(client, files, *, key=None, capture=None, **extra):  # type: ignore[no-untyped-def]
    if key is None:
        key = request_key_of(client.get("/collections/handbook/").content.decode(), UPLOAD)
    data = {"files": files, "request_key": key, **extra}
    if capture is None:
        return client.post(UPLOAD, data, follow=True)
    with capture(execute=True):
        response = client.post(UPLOAD, data)
    # The job ran when the request's transaction committed; now look at the page.
    return client.get(response["Location"])


def test_uploading_two_files_starts_one_job_that_ingests_both(
    alice, collection, celery_eager, django_capture_on_commit_callbacks
):
    response = post_upload(
        alice,
        [upload("install.md", INSTALL), upload("refunds.md", REFUNDS)],
        capture=django_capture_on_commit_callbacks,
    )

    job = IngestionJob.objects.get()
    assert job.status == "succeeded"
    assert job.sources_done == 2
    assert set(Source.objects.values_list("status", flat=True)) == {"ready"}
    page = response.content.decode()
    assert "Ingesting 2 documents in the background" in page
    assert f'id="job-{job.pk}"' in page
    assert "install.md" in page and "refunds.md" in page
    # Finished: the panel no longer polls.
    panel = page.split(f'id="job-{job.pk}"')[1].split(">")[0]
    assert "hx-trigger" not in panel


def test_upload_chooses_the_chunking_strategy(
    alice, collection, celery_eager, django_capture_on_commit_callbacks
):
    post_upload(
        alice,
        [upload("install.md", INSTALL)],
        capture=django_capture_on_commit_callbacks,
        chunking="sentence",
    )

    assert IngestionJob.objects.get().request["chunking"] == "sentence"
    collection.refresh_from_db()
    assert collection.chunking_strategy == "sentence"


def test_disallowed_and_oversized_files_are_refused_and_the_rest_ingested(
    alice, collection, settings, celery_eager, django_capture_on_commit_callbacks
):
    settings.RAG = {**settings.RAG, "ingestion": {**settings.RAG["ingestion"]}}
    settings.RAG["ingestion"]["max_file_bytes"] = 2000
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64

    response = post_upload(
        alice,
        [
            upload("install.md", INSTALL),
            upload("photo.png", png, "image/png"),
            upload("huge.txt", "word " * 1000, "text/plain"),
        ],
        capture=django_capture_on_commit_callbacks,
    )

    page = html.unescape(response.content.decode())
    assert "Not accepted: photo.png: binary content (image/png)" in page
    assert "Not accepted: huge.txt is 4.9 KiB; the largest accepted file is 2.0 KiB" in page
    assert list(Source.objects.values_list("location", "status")) == [
        ("upload:install.md", "ready")
    ]
    assert IngestionJob.objects.count() == 1


def test_an_upload_with_only_refused_files_starts_no_job(alice, collection):
    response = post_upload(alice, [upload("empty.txt", "", "text/plain")])

    assert "Not accepted: empty.txt: the file is empty" in response.content.decode()
    assert not IngestionJob.objects.exists()
    assert not Source.objects.exists()


def test_an_upload_without_files_is_a_message(alice, collection):
    response = post_upload(alice, [])

    assert b"Upload not started" in response.content
    assert not IngestionJob.objects.exists()


def test_a_double_submitted_upload_starts_one_job(alice, collection):
    key = request_key_of(alice.get("/collections/handbook/").content.decode(), UPLOAD)

    post_upload(alice, [upload("install.md", INSTALL)], key=key)
    second = post_upload(alice, [upload("install.md", INSTALL)], key=key)

    assert IngestionJob.objects.count() == 1
    assert b"already submitted" in second.content


def test_every_rendering_of_the_form_carries_a_new_token(alice, collection):
    first = request_key_of(alice.get("/collections/handbook/").content.decode(), UPLOAD)
    second = request_key_of(alice.get("/collections/handbook/").content.decode(), UPLOAD)

    assert first != second


def test_upload_without_csrf_token_is_rejected(user, collection):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)

    response = client.post(UPLOAD, {"files": [upload("a.md", INSTALL)], "request_key": "k"})

    assert response.status_code == 403
    assert not Source.objects.exists()


def test_a_reader_cannot_upload(reader, collection):
    response = post_upload(reader, [upload("a.md", INSTALL)], key="k")

    assert "You may not change" in response.content.decode()
    assert not Source.objects.exists()


def test_a_stranger_uploading_gets_not_found(bob, collection):
    response = bob.post(UPLOAD, {"files": [upload("a.md", INSTALL)], "request_key": "k"})

    assert response.status_code == 404
    assert not Source.objects.exists()


def test_adding_urls_accepts_only_web_addresses(alice, collection):
    page = alice.get("/collections/handbook/").content.decode()
    key = request_key_of(page, "/collections/handbook/urls/")

    response = alice.post(
        "/collections/handbook/urls/",
        {"urls": "file:///etc/passwd\n/etc/passwd", "request_key": key},
        follow=True,
    )

    page = html.unescape(response.content.decode())
    assert "Not accepted: file:///etc/passwd: only http and https addresses are supported" in page
    assert "Not accepted: /etc/passwd: not an http(s) address" in page
    assert not IngestionJob.objects.exists()

    alice.post(
        "/collections/handbook/urls/",
        {"urls": "https://example.com/a\nhttps://example.com/a", "request_key": key},
    )
    assert IngestionJob.objects.get().request["locations"] == ["https://example.com/a"]


def test_one_bad_address_does_not_stop_the_good_ones(alice, collection):
    page = alice.get("/collections/handbook/").content.decode()
    key = request_key_of(page, "/collections/handbook/urls/")
    typed = "\n".join(
        [
            "https://example.com/handbook",
            "ftp://example.com/archive.txt",
            "example.org/faq",
            "https://exa mple.com/broken",
            "https://example.com/pricing",
        ]
    )

    response = alice.post(
        "/collections/handbook/urls/", {"urls": typed, "request_key": key}, follow=True
    )

    job = IngestionJob.objects.get()
    assert job.request["locations"] == [
        "https://example.com/handbook",
        "https://example.com/pricing",
    ]
    page = html.unescape(response.content.decode())
    assert "Ingesting 2 documents in the background" in page
    assert "ftp://example.com/archive.txt: only http and https addresses are supported" in page
    assert "example.org/faq: not a web address; did you mean https://example.org/faq ?" in page
    assert "https://exa mple.com/broken: not a valid web address" in page
    # The refused addresses wait in the form, to correct and send again.
    textarea = page.split('name="urls"')[1].split("</textarea>")[0]
    assert textarea.split(">", 1)[1].strip().splitlines() == [
        "ftp://example.com/archive.txt",
        "example.org/faq",
        "https://exa mple.com/broken",
    ]
    # Once shown, the form is empty again.
    again = alice.get("/collections/handbook/").content.decode()
    assert again.split('name="urls"')[1].split("</textarea>")[0].split(">", 1)[1].strip() == ""


def test_job_panel_polls_while_running_and_stops_when_finished(alice, collection):
    job = IngestionJob.objects.create(collection=collection, sources_total=2, sources_done=1)
    url = f"/collections/handbook/jobs/{job.pk}/"

    running = alice.get(url, HTTP_HX_REQUEST="true")
    assert running.status_code == 200
    body = running.content.decode()
    assert body.lstrip().startswith("<article")  # the partial, not the page
    assert 'hx-trigger="every 1s"' in body
    assert 'value="50"' in body

    IngestionJob.objects.filter(pk=job.pk).update(
        status="partial",
        sources_done=2,
        sources_failed=1,
        report={
            "sources": [
                {"location": "upload:a.md", "status": "ingested", "chunks_written": 3},
                {"location": "upload:b.pdf", "status": "failed", "reason": "the PDF is encrypted"},
                {"location": "upload:c.md", "status": "quarantined", "reason": "held for review"},
            ]
        },
    )
    done = alice.get(url, HTTP_HX_REQUEST="true")
    body = done.content.decode()
    assert "hx-trigger" not in body
    assert done["HX-Trigger"] == "jobFinished"
    assert "the PDF is encrypted" in body
    assert "Review it in the quarantine" in body

    full = alice.get(url)
    assert b"<html" in full.content and b"Ingestion job" in full.content


def test_the_sources_partial_refreshes_the_table(alice, ingested):
    response = alice.get("/collections/handbook/", HTTP_HX_REQUEST="true")

    body = response.content.decode()
    assert body.lstrip().startswith('<div id="sources"')
    assert "install.md" in body and "refunds.md" in body
    source = Source.objects.get(location="upload:install.md")
    assert source.content_hash[:10] in body


def test_source_page_highlights_exactly_the_cited_span(alice, ingested):
    source = Source.objects.get(location="upload:install.md")
    chunk = Chunk.objects.filter(source=source).order_by("ordinal").last()

    response = alice.get(f"/collections/handbook/sources/{source.pk}/?chunk={chunk.pk}")

    page = response.content.decode()
    marked = page.split('<mark id="cited"')[1].split(">", 1)[1].split("</mark>")[0]
    assert html.unescape(marked) == source.text[chunk.char_start : chunk.char_end]
    assert page.count("<mark") == 1


def test_source_page_lists_passages_with_sections(alice, ingested):
    source = Source.objects.get(location="upload:install.md")

    page = alice.get(f"/collections/handbook/sources/{source.pk}/").content.decode()

    assert "Install guide" in page
    assert "Troubleshooting" in page
    assert "<mark" not in page


def test_a_vanished_passage_is_a_message(alice, ingested):
    source = Source.objects.get(location="upload:install.md")

    response = alice.get(f"/collections/handbook/sources/{source.pk}/?chunk=gone")

    assert response.status_code == 200
    assert b"no longer part of this document" in response.content


def test_markup_inside_a_document_is_shown_as_text(
    alice, collection, celery_eager, django_capture_on_commit_callbacks
):
    post_upload(alice, [upload("widget.md", HOSTILE)], capture=django_capture_on_commit_callbacks)
    source = Source.objects.get()
    chunk = source.chunks.first()

    page = alice.get(f"/collections/handbook/sources/{source.pk}/?chunk={chunk.pk}").content

    assert b'<script>alert("doc-xss")' not in page
    assert b"<b onmouseover" not in page
    assert b"&lt;script&gt;alert(&quot;doc-xss&quot;)" in page


def test_reingesting_a_source_starts_a_job(
    alice, ingested, celery_eager, django_capture_on_commit_callbacks
):
    source = Source.objects.get(location="upload:install.md")
    page = alice.get(f"/collections/handbook/sources/{source.pk}/").content.decode()
    action = f"/collections/handbook/sources/{source.pk}/reingest/"
    key = request_key_of(page, action)

    with django_capture_on_commit_callbacks(execute=True):
        alice.post(action, {"request_key": key})
    alice.post(action, {"request_key": key})

    job = IngestionJob.objects.order_by("-pk").first()
    assert IngestionJob.objects.count() == 2
    assert job.request["source_ids"] == [source.pk]
    assert job.report["sources"][0]["status"] == "unchanged"


def test_removing_a_source_asks_then_drops_its_passages(alice, ingested):
    source = Source.objects.get(location="upload:install.md")
    url = f"/collections/handbook/sources/{source.pk}/remove/"
    assert b"Remove the document" in alice.get(url).content

    alice.post(url)

    assert not Source.objects.filter(pk=source.pk).exists()
    assert not Chunk.objects.filter(source_id=source.pk).exists()
    assert Chunk.objects.filter(collection=ingested).exists()


def test_a_stranger_cannot_open_sources_or_jobs(bob, ingested):
    source = Source.objects.first()
    job = IngestionJob.objects.first()

    assert bob.get(f"/collections/handbook/sources/{source.pk}/").status_code == 404
    assert bob.get(f"/collections/handbook/jobs/{job.pk}/").status_code == 404
    assert bob.post(f"/collections/handbook/sources/{source.pk}/remove/").status_code == 404
    assert Source.objects.filter(pk=source.pk).exists()


def test_uploading_an_identical_file_again_is_unchanged_and_costs_no_embeddings(
    alice, ingested, celery_eager, django_capture_on_commit_callbacks
):
    source = Source.objects.get(location="upload:install.md")
    stored_file = source.file.name
    chunk_ids = set(source.chunks.values_list("pk", flat=True))

    response = post_upload(
        alice, [upload("install.md", INSTALL)], capture=django_capture_on_commit_callbacks
    )

    job = IngestionJob.objects.order_by("-pk").first()
    assert job.embeddings_computed == 0
    assert job.chunks_written == 0
    assert [s["status"] for s in job.report["sources"]] == ["unchanged"]
    source.refresh_from_db()
    assert source.status == "ready"
    assert source.file.name == stored_file
    assert set(source.chunks.values_list("pk", flat=True)) == chunk_ids
    page = response.content.decode()
    panel = page.split(f'id="job-{job.pk}"')[1].split("</article>")[0]
    assert "unchanged" in panel
    assert "0 embeddings computed" in panel


def test_uploading_a_changed_file_under_the_same_name_ingests_it_again(
    alice, ingested, celery_eager, django_capture_on_commit_callbacks
):
    post_upload(
        alice,
        [upload("install.md", INSTALL + "\n\n## Upgrades\n\nRun the installer again.\n")],
        capture=django_capture_on_commit_callbacks,
    )

    job = IngestionJob.objects.order_by("-pk").first()
    assert [s["status"] for s in job.report["sources"]] == ["ingested"]
    assert job.embeddings_computed > 0
    source = Source.objects.get(location="upload:install.md")
    assert "Run the installer again." in source.text
    with source.file.open("rb") as fh:
        assert b"Run the installer again." in fh.read()


def test_a_corrupt_docx_is_refused_as_not_a_valid_docx(
    alice, collection, celery_eager, django_capture_on_commit_callbacks
):
    word = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    damaged_header = b"\xff\xfe\x00\x00" + bytes(range(256)) * 8
    archive = docx_bytes(docx_paragraph("Minutes of the board meeting."))
    truncated = archive[: len(archive) // 2]

    response = post_upload(
        alice,
        [upload("minutes.docx", damaged_header, word), upload("agenda.docx", truncated, word)],
        capture=django_capture_on_commit_callbacks,
    )

    page = html.unescape(response.content.decode())
    assert "Not accepted: minutes.docx: not a valid DOCX file" in page
    # A damaged archive is only found out when read: the job says why it failed.
    source = Source.objects.get(location="upload:agenda.docx")
    assert source.status == "failed"
    assert source.error.startswith("not a valid DOCX file")
    job = IngestionJob.objects.get()
    panel = page.split(f'id="job-{job.pk}"')[1].split("</article>")[0]
    assert "not a valid DOCX file: its zip archive is damaged" in panel
    assert "utf-32" not in page.lower()


def test_a_pdf_without_a_title_is_listed_by_its_file_name(
    alice, collection, celery_eager, django_capture_on_commit_callbacks
):
    post_upload(
        alice,
        [
            upload(
                "harbour-fees-2024.pdf",
                pdf_bytes(["Mooring costs 40 EUR a night."]),
                "application/pdf",
            )
        ],
        capture=django_capture_on_commit_callbacks,
    )

    page = alice.get("/collections/handbook/").content.decode()
    row = page.split("<tbody>")[1].split("</tr>")[0]
    assert ">harbour-fees-2024</a>" in row
    assert "untitled" not in page.lower()


def test_an_upload_past_the_users_job_budget_is_refused_with_a_message(alice, collection, rag_set):
    rag_set("quotas", {"bytes_per_day": 0, "chunks_per_day": 0, "concurrent_jobs": 1})
    first = post_upload(alice, [upload("install.md", INSTALL)])
    assert "Ingesting 1 document in the background" in first.content.decode()

    second = post_upload(alice, [upload("refunds.md", REFUNDS)])

    page = html.unescape(second.content.decode())
    assert "Upload not started: you already have 1 ingestion job queued or running" in page
    assert IngestionJob.objects.count() == 1
    assert not Source.objects.filter(location="upload:refunds.md").exists()
