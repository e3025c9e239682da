"""Uploaded files over the size limit are never stored, only counted."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import RequestFactory

from collections_app.uploads import OversizedUpload


def parsed_files(settings, limit: int, files: dict[str, bytes]):
    settings.RAG = {
        **settings.RAG,
        "ingestion": {**settings.RAG["ingestion"], "max_file_bytes": limit},
    }
    uploads = [SimpleUploadedFile(name, data) for name, data in files.items()]
    request = RequestFactory().post("/upload/", {"files": uploads})
    return request.FILES.getlist("files")


def test_a_file_over_the_limit_keeps_its_name_and_size_but_no_content(settings):
    big = b"x" * 300_000  # several of the parser's 64 KiB chunks
    small = b"# Refunds\n\nRefunds are paid within 30 days.\n"

    stored_big, stored_small = parsed_files(settings, 100_000, {"big.md": big, "refunds.md": small})

    assert isinstance(stored_big, OversizedUpload)
    assert (stored_big.name, stored_big.size) == ("big.md", len(big))
    assert stored_big.read() == b""
    assert not isinstance(stored_small, OversizedUpload)
    assert stored_small.read() == small


def test_a_file_of_exactly_the_limit_is_stored_whole(settings):
    data = b"y" * 100_000
    (stored,) = parsed_files(settings, len(data), {"exact.txt": data})
    assert not isinstance(stored, OversizedUpload)
    assert stored.read() == data
