"""What the loaders share: their registry, decoding, newline normalisation, sizes."""

from __future__ import annotations

import codecs
import datetime as dt
import json
import re
from typing import Any, Protocol

from ragsite.registry import Registry

from ..detect import text_encoding
from ..limits import IngestionLimits
from ..types import (
    LoadedDocument,
    RawSource,
    SourceLoadError,
    SourceTooLarge,
    UnsupportedSourceType,
)


class Loader(Protocol):
    """``loader(raw, *, limits) -> LoadedDocument``: one source kind's bytes to text."""

    def __call__(self, raw: RawSource, *, limits: IngestionLimits) -> LoadedDocument: ...


def _unsupported(kind: str, known: list[str]) -> UnsupportedSourceType:
    return UnsupportedSourceType(f"no loader for {kind!r}; known: {', '.join(known)}")


LOADERS: Registry[Loader] = Registry("loader", unknown=_unsupported)
"""Loaders by the source kind :func:`..detect.detect_kind` names; each registers itself."""

_CHARSET = re.compile(r"charset\s*=\s*[\"']?([\w.:-]+)", re.I)
_NEWLINES = re.compile(r"\r\n?|\u2028|\u2029")
_BLANK_RUNS = re.compile(r"\n{3,}")


def format_bytes(size: int) -> str:
    """``52428800`` → ``"50.0 MiB"``: sizes in messages people read."""
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} bytes"  # pragma: no cover - the loop always returns


def normalise_newlines(text: str) -> str:
    return _NEWLINES.sub("\n", text)


def squeeze_blank_lines(text: str) -> str:
    """At most one blank line between blocks, none at either end."""
    return _BLANK_RUNS.sub("\n\n", text).strip("\n")


def declared_charset(raw: RawSource) -> str | None:
    """The charset a web server declared in its Content-Type, if it names a known codec."""
    match = _CHARSET.search(raw.declared_mime)
    if not match:
        return None
    try:
        return codecs.lookup(match.group(1)).name
    except LookupError:
        return None


def decode_text(raw: RawSource) -> str:
    """Decode a text source: BOM (or UTF-16 without one), then a server-declared
    charset, else strict UTF-8.

    Guessing an encoding silently turns bytes into wrong text that is then indexed and
    cited; a clear error naming the offending byte lets the owner fix the file instead.
    """
    data = raw.data
    encoding = text_encoding(data) or declared_charset(raw) or "utf-8"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1].hex()
        label = "UTF-8" if encoding == "utf-8" else encoding
        raise SourceLoadError(
            f"the file is not valid {label}: byte 0x{bad} at offset {exc.start} cannot be "
            f"decoded ({exc.reason}); save it as UTF-8"
        ) from exc
    if text.startswith("\ufeff"):
        text = text[1:]
    return normalise_newlines(text)


def jsonable(value: Any, *, max_chars: int | None = None) -> Any:
    """Metadata is stored as JSON: dates become ISO strings, unknown objects strings.

    With ``max_chars``, :class:`SourceTooLarge` is raised as soon as the converted
    value would take more than that many characters as JSON (roughly), before it is
    built: a structure that shares its parts (YAML aliases) may expand to far more
    than the text it came from.
    """
    budget = [max_chars if max_chars is not None else -1]
    return _jsonable(value, budget, max_chars)


def _jsonable(value: Any, budget: list[int], limit: int | None) -> Any:
    converted: Any
    if value is None or isinstance(value, bool | int | float):
        converted, cost = value, 8
    elif isinstance(value, str):
        converted, cost = value, len(value) + 2
    elif isinstance(value, dt.date | dt.datetime | dt.time):
        converted = value.isoformat()
        cost = len(converted) + 2
    elif isinstance(value, dict):
        _spend(budget, 2, limit)
        return {
            _spent_key(str(k), budget, limit): _jsonable(v, budget, limit) for k, v in value.items()
        }
    elif isinstance(value, list | tuple | set):
        _spend(budget, 2, limit)
        return [_jsonable(v, budget, limit) for v in value]
    else:
        converted = str(value)
        cost = len(converted) + 2
    _spend(budget, cost, limit)
    return converted


def _spent_key(key: str, budget: list[int], limit: int | None) -> str:
    _spend(budget, len(key) + 4, limit)
    return key


def _spend(budget: list[int], cost: int, limit: int | None) -> None:
    if limit is None:
        return
    budget[0] -= cost
    if budget[0] < 0:
        raise SourceTooLarge(
            f"the document's metadata is larger than the limit of {format_bytes(limit)}"
        )


def metadata_check(metadata: dict[str, object], *, max_bytes: int) -> None:
    """Raise :class:`SourceTooLarge` when ``metadata`` serialises to more than ``max_bytes``."""
    size = len(json.dumps(metadata, ensure_ascii=False, default=str).encode("utf-8"))
    if size > max_bytes:
        raise SourceTooLarge(
            f"the document's metadata is {format_bytes(size)} as JSON; "
            f"the limit is {format_bytes(max_bytes)}"
        )
