"""Prompt-injection validator: text in a document that tries to steer the model.

Every finding is a named :class:`Signal` with a weight: ``STRONG`` (instructions aimed
at the model, visible or hidden) rejects the document; ``WEAK`` (a role marker, an odd
link, a base64 blob of plain text, a lot of hidden text, or an instruction that is quoted
or discussed rather than given) makes it suspicious. Documentation that *talks about*
prompt injection is therefore at most suspicious, never rejected.
"""

from __future__ import annotations

import base64
import binascii
import re
from bisect import bisect_right

from ..limits import IngestionLimits
from ..types import LoadedDocument, Signal
from .base import VALIDATORS, Validator
from .normalise import detection_view
from .patterns import (
    ADDRESSED_TO_AI,
    AI_MENTION,
    BASE64_BLOB,
    CONDITIONAL,
    DISCUSSION_CUES,
    HIDDEN_DIRECTIVE,
    INSTRUCTION_PATTERNS,
    MARKDOWN_LINK,
    QUERY_PLACEHOLDER,
    QUOTES,
    ROLE_MARKERS,
    TAG_CHARACTERS,
    URL_DATA_PARAM,
    URL_PLACEHOLDER,
    Pattern,
)

STRONG = 1.0
WEAK = 0.5
EXCERPT_CONTEXT = 80
# Plain hidden text (no instructions) this long is worth a reviewer's look.
HIDDEN_WORDS_WEAK = 40
# Enough signals of one kind to convince a reviewer; more would only bloat the record.
MAX_SIGNALS_PER_NAME = 10
_SENTENCE_END = re.compile(r"[.!?](?=\s)|\n\s*\n")
_FENCE = re.compile(r"^(?:```|~~~)", re.M)
_URL = re.compile(r"\b(?:https?|ftp)://\S+|\bwww\.\S+", re.I)
# Bare host names ("evil.example", "collector.io"): not words of a sentence either.
_HOST = re.compile(r"\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b", re.I)


def excerpt_of(text: str, start: int, end: int) -> str:
    """The match with up to 80 characters either side, whitespace collapsed."""
    return " ".join(text[max(0, start - EXCERPT_CONTEXT) : end + EXCERPT_CONTEXT].split())


def instruction_hits(text: str) -> list[tuple[Pattern, re.Match[str]]]:
    """Every instruction-like passage in ``text`` as written, in order."""
    # Whitespace squeezed so that "you  are\nnow" still meets the keyword "you are now".
    lowered = " " + " ".join(text.lower().split())
    hits = [
        (pattern, match)
        for pattern in INSTRUCTION_PATTERNS
        if pattern.may_match(lowered)
        for match in pattern.regex.finditer(text)
    ]
    return sorted(hits, key=lambda hit: hit[1].start())


def instruction_spans(text: str) -> list[tuple[Pattern, int, int]]:
    """Every instruction in ``text`` as a model reads it, with its span in ``text``.

    The patterns run over the detection view (zero-width characters, soft hyphens,
    homoglyphs, full-width letters, accents, leetspeak and letter spacing undone), and
    each finding is mapped back to the characters of ``text`` it came from.
    """
    view = detection_view(text)
    found: list[tuple[Pattern, int, int]] = []
    for pattern, match in instruction_hits(view.text):
        start, end = view.span(*match.span())
        found.append((pattern, start, end))
    return found


def check_injection(doc: LoadedDocument, limits: IngestionLimits) -> tuple[list[Signal], list[str]]:
    """Prompt-injection validator: (signals, errors); it never reports errors."""
    text = doc.text
    signals: list[Signal] = []
    signals += _visible_instructions(text)
    signals += _role_markers(text)
    signals += _links(text)
    signals += _encoded_payloads(text)
    signals += _hidden(doc)
    signals += _metadata_instructions(doc)
    return _capped(signals), []


PROMPT_INJECTION = VALIDATORS.add(
    "prompt-injection", Validator(check=check_injection, skips_oversized_text=True)
)


def _visible_instructions(text: str) -> list[Signal]:
    fences = [m.start() for m in _FENCE.finditer(text)]
    signals: list[Signal] = []
    for pattern, start, end in instruction_spans(text):
        sentence = _sentence(text, start, end)
        reason = _why_weaker(text, start, sentence, fences)
        detail = pattern.detail + (f" ({reason}, so only suspicious)" if reason else "")
        signals.append(
            Signal(
                name=pattern.signal,
                detail=detail,
                excerpt=excerpt_of(text, start, end),
                start=start,
                end=end,
                weight=WEAK if reason else STRONG,
            )
        )
    return signals


def _sentence(text: str, start: int, end: int) -> str:
    window_start = max(0, start - 300)
    before = [m.end() for m in _SENTENCE_END.finditer(text, window_start, start)]
    sentence_start = before[-1] if before else window_start
    after = _SENTENCE_END.search(text, end, end + 300)
    return text[sentence_start : after.start() if after else min(len(text), end + 300)]


def _why_weaker(text: str, start: int, sentence: str, fences: list[int]) -> str:
    """Why an instruction-like passage reads as a mention, not an order ("" if it doesn't)."""
    if bisect_right(fences, start) % 2 == 1:
        return "inside a code block"
    lead = text[max(0, start - 3) : start]
    if any(quote in lead for quote in QUOTES):
        return "quoted"
    # Addresses are not words of the sentence ("collector.example/log" is no example).
    words = _HOST.sub(" ", _URL.sub(" ", sentence))
    if DISCUSSION_CUES.search(words):
        return "the sentence discusses it"
    if CONDITIONAL.search(words) and not AI_MENTION.search(words):
        return "given as a reader's option"
    return ""


def _role_markers(text: str) -> list[Signal]:
    return [
        Signal(
            name="role-marker",
            detail=f"chat role marker {' '.join(m.group(0).split())!r}",
            excerpt=excerpt_of(text, m.start(), m.end()),
            start=m.start(),
            end=m.end(),
            weight=WEAK,
        )
        for m in ROLE_MARKERS.finditer(text)
    ]


def _links(text: str) -> list[Signal]:
    signals: list[Signal] = []
    for match in MARKDOWN_LINK.finditer(text):
        is_image, url = match.group(1) == "!", match.group(3)
        what = "image" if is_image else "link"
        # An image loads by itself when the answer is shown; a link needs a click, and
        # placeholders in a link's path are ordinary templates (model cards, docs).
        if is_image and URL_PLACEHOLDER.search(url):
            detail = "a Markdown image whose URL carries a template placeholder"
        elif is_image and URL_DATA_PARAM.search(url):
            detail = "a Markdown image whose URL sends data in its query string"
        elif QUERY_PLACEHOLDER.search(url):
            detail = f"a Markdown {what} whose query string carries a template placeholder"
        else:
            continue
        signals.append(
            Signal(
                name="exfiltration-link",
                detail=f"{detail}: {url[:200]}",
                excerpt=excerpt_of(text, match.start(), match.end()),
                start=match.start(),
                end=match.end(),
                weight=WEAK,
            )
        )
    return signals


def _decoded_text(blob: str) -> str | None:
    """The prose a base64 blob stands for, or None.

    Binary (images, keys, hashes) and structured text (JSON page tokens, SVG, PEM
    certificates) are everyday content in technical documents; only prose is odd.
    """
    padded = blob + "=" * (-len(blob) % 4)
    try:
        data = (
            base64.urlsafe_b64decode(padded)
            if ("-" in blob or "_" in blob)
            else base64.b64decode(padded)
        )
        decoded = data.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    if not decoded or decoded.lstrip().startswith(("{", "[", "<", "-----")):
        return None
    prose = sum(ch.isalpha() or ch in " \n'," for ch in decoded)
    words = re.findall(r"[^\W\d_]{2,}", decoded)
    return decoded if prose / len(decoded) >= 0.85 and len(words) >= 4 else None


def _encoded_payloads(text: str) -> list[Signal]:
    signals: list[Signal] = []
    for match in BASE64_BLOB.finditer(text):
        decoded = _decoded_text(match.group(0))
        if decoded is None:
            continue
        hits = instruction_spans(decoded)
        signals.append(
            Signal(
                name="encoded-payload",
                detail=(
                    f"base64 text that decodes to instructions: {decoded[:120]!r}"
                    if hits
                    else f"base64 blob of {len(match.group(0))} characters that decodes to text"
                ),
                excerpt=excerpt_of(text, match.start(), match.end()),
                start=match.start(),
                end=match.end(),
                weight=STRONG if hits else WEAK,
            )
        )
    return signals


def _hidden(doc: LoadedDocument) -> list[Signal]:
    """Hidden HTML content, and ASCII smuggled in invisible Unicode tag characters."""
    signals: list[Signal] = []
    for hidden in doc.hidden_texts:
        # HTML comments (stored as "<!-- … -->") are developers' notes and licence
        # headers: only instructions in them count.
        is_comment = hidden.startswith("<!--")
        signal = _hidden_signal(hidden, start=None, end=None, is_comment=is_comment)
        if signal:
            signals.append(signal)
    for match in TAG_CHARACTERS.finditer(doc.text):
        smuggled = "".join(chr(ord(ch) - 0xE0000) for ch in match.group(0))
        signal = _hidden_signal(smuggled, start=match.start(), end=match.end(), always=True)
        if signal:
            signals.append(signal)
    return signals


def _hidden_signal(
    text: str,
    *,
    start: int | None,
    end: int | None,
    always: bool = False,
    is_comment: bool = False,
) -> Signal | None:
    """Strong when hidden text gives instructions; weak when it is merely long (or smuggled)."""
    found = _instruction_in(text, is_comment=is_comment)
    if found:
        (span_start, span_end), reason = found
        return Signal(
            name="hidden-text",
            detail=f"text hidden from readers {reason}",
            excerpt=excerpt_of(text, span_start, span_end),
            start=start,
            end=end,
            weight=STRONG,
        )
    words = len(text.split())
    if always or (not is_comment and words >= HIDDEN_WORDS_WEAK):
        return Signal(
            name="hidden-text",
            detail=f"{words} words of text hidden from readers",
            excerpt=" ".join(text.split())[: 2 * EXCERPT_CONTEXT],
            start=start,
            end=end,
            weight=WEAK,
        )
    return None


def _instruction_in(text: str, *, is_comment: bool) -> tuple[tuple[int, int], str] | None:
    """The first instruction or role marker in hidden text: its span and what it does."""
    hits = instruction_spans(text)
    if hits:
        pattern, start, end = hits[0]
        return (start, end), pattern.detail
    role = ROLE_MARKERS.search(text)
    if role:
        return role.span(), "carries a chat role marker"
    view = detection_view(text)
    directive = (ADDRESSED_TO_AI if is_comment else HIDDEN_DIRECTIVE).search(view.text)
    if directive:
        return view.span(*directive.span()), "tells an AI model what to do"
    return None


def _metadata_texts(doc: LoadedDocument) -> list[tuple[str, str]]:
    """``(field, text)`` for the title and every string in the metadata."""
    found: list[tuple[str, str]] = [("title", doc.title)] if doc.title else []

    def walk(name: str, value: object) -> None:
        if isinstance(value, str):
            found.append((name, value))
        elif isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{name}.{key}" if name else str(key), inner)
        elif isinstance(value, list):
            for inner in value:
                walk(name, inner)

    walk("", doc.metadata)
    return found


def _metadata_instructions(doc: LoadedDocument) -> list[Signal]:
    """Instructions in the title or metadata (PDF /Title, /Subject, /Keywords, front matter).

    Metadata is read by whatever summarises or indexes a document, rarely by a person:
    an instruction there is strong, as in hidden text.
    """
    signals: list[Signal] = []
    for name, text in _metadata_texts(doc):
        hits = instruction_spans(text)
        if hits:
            pattern, start, end = hits[0]
            signals.append(
                Signal(
                    name="metadata-instruction",
                    detail=f"the document's {name} {pattern.detail}",
                    excerpt=excerpt_of(text, start, end),
                    weight=STRONG,
                )
            )
    return signals


def _capped(signals: list[Signal]) -> list[Signal]:
    """At most ``MAX_SIGNALS_PER_NAME`` per name, the strongest first."""
    kept: list[Signal] = []
    counts: dict[str, int] = {}
    for signal in sorted(signals, key=lambda s: -s.weight):
        if counts.get(signal.name, 0) < MAX_SIGNALS_PER_NAME:
            counts[signal.name] = counts.get(signal.name, 0) + 1
            kept.append(signal)
    return kept
