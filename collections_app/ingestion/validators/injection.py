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


def excerpt_of(text: str, start: int, end: int) -> str:
    """The match with up to 80 characters either side, whitespace collapsed."""
    return " ".join(text[max(0, start - EXCERPT_CONTEXT) : end + EXCERPT_CONTEXT].split())


def instruction_hits(text: str) -> list[tuple[Pattern, re.Match[str]]]:
    """Every instruction-like passage in ``text``, in order."""
    # Whitespace squeezed so that "you  are\nnow" still meets the keyword "you are now".
    lowered = " " + " ".join(text.lower().split())
    hits = [
        (pattern, match)
        for pattern in INSTRUCTION_PATTERNS
        if pattern.may_match(lowered)
        for match in pattern.regex.finditer(text)
    ]
    return sorted(hits, key=lambda hit: hit[1].start())


def check_injection(doc: LoadedDocument, limits: IngestionLimits) -> tuple[list[Signal], list[str]]:
    """Prompt-injection validator: (signals, errors); it never reports errors."""
    text = doc.text
    signals: list[Signal] = []
    signals += _visible_instructions(text)
    signals += _role_markers(text)
    signals += _links(text)
    signals += _encoded_payloads(text)
    signals += _hidden(doc)
    return _capped(signals), []


PROMPT_INJECTION = VALIDATORS.add(
    "prompt-injection", Validator(check=check_injection, skips_oversized_text=True)
)


def _visible_instructions(text: str) -> list[Signal]:
    fences = [m.start() for m in _FENCE.finditer(text)]
    signals: list[Signal] = []
    for pattern, match in instruction_hits(text):
        start, end = match.span()
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
    words = _URL.sub(" ", sentence)
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
        hits = instruction_hits(decoded)
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
    hits = instruction_hits(text)
    if hits:
        return hits[0][1].span(), hits[0][0].detail
    role = ROLE_MARKERS.search(text)
    if role:
        return role.span(), "carries a chat role marker"
    directive = (ADDRESSED_TO_AI if is_comment else HIDDEN_DIRECTIVE).search(text)
    if directive:
        return directive.span(), "tells an AI model what to do"
    return None


def _capped(signals: list[Signal]) -> list[Signal]:
    """At most ``MAX_SIGNALS_PER_NAME`` per name, the strongest first."""
    kept: list[Signal] = []
    counts: dict[str, int] = {}
    for signal in sorted(signals, key=lambda s: -s.weight):
        if counts.get(signal.name, 0) < MAX_SIGNALS_PER_NAME:
            counts[signal.name] = counts.get(signal.name, 0) + 1
            kept.append(signal)
    return kept
