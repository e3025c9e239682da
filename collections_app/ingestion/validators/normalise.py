"""Text as a model reads it, for detection: disguises undone, offsets kept.

Instructions hidden from pattern matching by zero-width characters, soft hyphens,
homoglyphs (Cyrillic U+043E for Latin "o"), full-width or mathematical letters, accents,
leetspeak ("1gn0r3") or letter spacing ("i g n o r e") still read as the plain words to
a language model. ``detection_view`` undoes those disguises in a copy of the text and
keeps, for every character of the copy, the offset of the character it came from, so a
finding in the copy points at the right place of the original.

Homoglyphs are folded with the Unicode confusables table shipped by
``confusable_homoglyphs`` (Unicode TR39), restricted to look-alikes of ASCII letters
and digits.
"""

from __future__ import annotations

import json
import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

# Letters and digits leetspeak writes for letters; only used inside words that mix
# both, so numbers, versions and codes stay as they are.
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b",
                       "9": "g", "2": "z", "6": "g", "@": "a", "$": "s", "!": "i", "|": "l"})  # fmt: skip
_MIXED_WORD = re.compile(r"[\w@$!|]*[A-Za-z][\w@$!|]*")
_HAS_DIGIT = re.compile(r"[0-9@$|]")
# Five or more single letters in a row separated by single spaces: "i g n o r e".
_SPACED = re.compile(r"(?<![\w])(?:[A-Za-z] ){4,}[A-Za-z](?![\w])")
# Emphasis and code marks that split a sentence for a pattern but not for a model.
_MARKUP = frozenset("*_~`")


@dataclass(frozen=True)
class _Layer:
    """Where the pieces of a derived text start in the text it was derived from.

    Piece ``k`` starts at ``starts[k]`` in the derived text and at ``sources[k]`` in the
    source; inside a piece, offsets advance together, but never past the next piece's
    source (a character that became two maps both to the one it came from).
    """

    starts: tuple[int, ...]
    sources: tuple[int, ...]

    def source_of(self, position: int) -> int:
        k = bisect_right(self.starts, position) - 1
        if k < 0:
            return position
        mapped = self.sources[k] + (position - self.starts[k])
        if k + 1 < len(self.sources):
            mapped = min(mapped, max(self.sources[k], self.sources[k + 1] - 1))
        return mapped


@dataclass(frozen=True)
class DetectionView:
    """A normalised copy of a text and the way back to the original's offsets."""

    text: str
    layers: tuple[_Layer, ...]  # applied last to first to map back
    original_length: int

    def offset(self, position: int) -> int:
        """The original offset of the character at ``position`` of ``text``."""
        for layer in reversed(self.layers):
            position = layer.source_of(position)
        return position

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original span of ``text[start:end]``."""
        if end <= start:
            at = self.offset(start) if start < len(self.text) else self.original_length
            return at, at
        return self.offset(start), self.offset(end - 1) + 1


@lru_cache(maxsize=1)
def _homoglyphs() -> dict[str, str]:
    """Each non-ASCII character that looks like an ASCII letter or digit → that character."""
    path = resources.files("confusable_homoglyphs") / "confusables.json"
    table: dict[str, list[dict[str, str]]] = json.loads(path.read_text(encoding="utf-8"))
    folded: dict[str, str] = {}
    for character, entries in table.items():
        if len(character) != 1 or character.isascii():
            continue
        ascii_like = [e["c"] for e in entries if len(e["c"]) == 1 and e["c"].isascii()]
        letters = [c for c in ascii_like if c.isalnum()]
        if not letters:
            continue
        same_case = [c for c in letters if c.isupper() == character.isupper() and c.isalpha()]
        glyph = (same_case or letters)[0]
        # TR39 gives "I" and "l" one prototype, "l": a capital (Greek iota) reads "I".
        folded[character] = "I" if glyph == "l" and character.isupper() else glyph
    return folded


def _fold_char(character: str) -> str:
    """One character as plain text: compatibility form, no accents, no homoglyph."""
    if character.isascii():
        return character
    category = unicodedata.category(character)
    if category in {"Cf", "Mn", "Me"}:
        return ""  # zero-width characters, soft hyphens, joiners, combining marks
    compatible = unicodedata.normalize("NFKC", character)
    if compatible.isascii():
        return compatible  # full-width and mathematical letters, ligatures
    homoglyph = _homoglyphs().get(character)
    if homoglyph is not None:
        return homoglyph
    decomposed = unicodedata.normalize("NFKD", compatible)
    stripped = "".join(c for c in decomposed if not unicodedata.combining(c))
    return "".join(_homoglyphs().get(c, c) for c in stripped)


# Characters the ASCII fast path cannot copy as they are.
_SPECIAL = re.compile(r"[^\x00-\x7f]|[*_~`]")


def detection_view(text: str) -> DetectionView:
    """``text`` with its disguises undone (see the module docstring), offsets kept."""
    pieces: list[str] = []
    starts: list[int] = []
    sources: list[int] = []
    length = 0
    last = 0
    for match in _SPECIAL.finditer(text):
        if match.start() > last:
            starts.append(length)
            sources.append(last)
            pieces.append(text[last : match.start()])
            length += match.start() - last
        character = match.group(0)
        folded = "" if character in _MARKUP else _fold_char(character)
        if folded:
            starts.append(length)
            sources.append(match.start())
            pieces.append(folded)
            length += len(folded)
        last = match.end()
    if last < len(text):
        starts.append(length)
        sources.append(last)
        pieces.append(text[last:])
    plain = "".join(pieces)
    layers = [_Layer(tuple(starts), tuple(sources))]
    plain, unspaced = _unspace(plain)
    if unspaced is not None:
        layers.append(unspaced)
    plain = _MIXED_WORD.sub(_unleet, plain)  # length-preserving: offsets unchanged
    return DetectionView(plain, tuple(layers), len(text))


def _unleet(match: re.Match[str]) -> str:
    word = match.group(0)
    return word.translate(_LEET) if _HAS_DIGIT.search(word) else word


def _unspace(text: str) -> tuple[str, _Layer | None]:
    if not _SPACED.search(text):
        return text, None
    pieces: list[str] = []
    starts: list[int] = []
    sources: list[int] = []
    length = 0
    position = 0
    for match in _SPACED.finditer(text):
        spans = [(position, match.start())] + [
            (offset, offset + 1) for offset in range(match.start(), match.end(), 2)
        ]
        for begin, finish in spans:
            if finish > begin:
                starts.append(length)
                sources.append(begin)
                pieces.append(text[begin:finish])
                length += finish - begin
        position = match.end()
    starts.append(length)
    sources.append(position)
    pieces.append(text[position:])
    return "".join(pieces), _Layer(tuple(starts), tuple(sources))
