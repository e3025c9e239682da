"""An upload handler that stops storing a file once it passes the largest accepted size.

Django's own handlers spool every uploaded file to memory or a temporary file
before any view runs, however large it is. This handler goes first: past the
limit it keeps only the byte count, so an oversized file costs neither disk nor
memory, and the upload service refuses it by name and size while the other
files of the same upload go ahead.
"""

from __future__ import annotations

from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler
from django.http import HttpRequest

from collections_app.ingestion.limits import IngestionLimits


class OversizedUpload(UploadedFile):
    """What is left of a file over the limit: its name and full size, no content."""

    def __init__(self, *, name: str, size: int, content_type: str | None) -> None:
        from io import BytesIO

        super().__init__(BytesIO(b""), name=name, content_type=content_type, size=size)
        self.oversized = True


class SizeLimitedUploadHandler(FileUploadHandler):
    """Passes data on to the next handlers until a file exceeds ``max_file_bytes``."""

    def __init__(self, request: HttpRequest | None = None) -> None:
        super().__init__(request)
        self.limit = IngestionLimits.from_settings().max_file_bytes
        self.received = 0
        self.over = False

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self.received = 0
        self.over = False

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self.received += len(raw_data)
        if self.received > self.limit:
            self.over = True
            return None  # the handlers after this one never see the rest
        return raw_data

    def file_complete(self, file_size: int) -> UploadedFile | None:
        if not self.over:
            return None  # the next handler returns the stored file
        return OversizedUpload(
            name=self.file_name or "upload", size=self.received, content_type=self.content_type
        )
