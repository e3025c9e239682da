"""Finding HTML elements a reader cannot see.

Hidden text is the classic carrier of prompt injection: a page looks harmless in the
browser while the model reads "ignore previous instructions". Elements hidden by the
``hidden`` attribute, ``aria-hidden``, or inline styles (``display:none``,
``visibility:hidden``, zero size or opacity, off-screen positioning, text in the
background colour) are removed from the indexed text and handed to the validator.

Rules of the page's own ``<style>`` elements that hide by themselves (``.promo {
display: none }``) are applied first, as inline styles of the elements their
selectors match (tinycss2 parses the CSS, cssselect turns selectors into XPath);
inline declarations still win, as in a browser. Rules inside ``@media`` and
other at-rules, and external stylesheets (never fetched), are not applied: text
hidden only through them stays in the indexed text, where the injection
validator still reads it as visible text.
"""

from __future__ import annotations

import colorsys
import re
from dataclasses import dataclass

import tinycss2
from cssselect import HTMLTranslator, SelectorError
from lxml import etree

Rgb = tuple[int, int, int]
Element = etree._Element

_NAMED: dict[str, Rgb] = {
    "white": (255, 255, 255),
    "snow": (255, 250, 250),
    "ivory": (255, 255, 240),
    "whitesmoke": (245, 245, 245),
    "black": (0, 0, 0),
    "silver": (192, 192, 192),
    "gray": (128, 128, 128),
    "grey": (128, 128, 128),
    "red": (255, 0, 0),
    "maroon": (128, 0, 0),
    "yellow": (255, 255, 0),
    "olive": (128, 128, 0),
    "lime": (0, 255, 0),
    "green": (0, 128, 0),
    "aqua": (0, 255, 255),
    "cyan": (0, 255, 255),
    "teal": (0, 128, 128),
    "blue": (0, 0, 255),
    "navy": (0, 0, 128),
    "fuchsia": (255, 0, 255),
    "magenta": (255, 0, 255),
    "purple": (128, 0, 128),
    "orange": (255, 165, 0),
}
_HEX = re.compile(r"#([0-9a-f]{3,8})\b")
_FUNC = re.compile(r"(rgba?|hsla?)\(\s*([^)]*)\)")
_ZERO = re.compile(r"^-?0*\.?0*(?:px|pt|em|rem|ex|ch|vw|vh|%)?$")
_LENGTH = re.compile(r"^(-?\d+(?:\.\d+)?)(px|pt|em|rem|%)?$")
_OFFSCREEN_PX = -999
# Colours closer than this on every channel are unreadable against each other.
_SAME_COLOUR_DELTA = 8


@dataclass(frozen=True)
class Inherited:
    """Colour and background in force at an element, when declared inline."""

    color: Rgb | None = None
    background: Rgb | None = None


def parse_style(value: str) -> dict[str, str]:
    """``"color: #FFF; display:none !important"`` → ``{"color": "#fff", "display": "none"}``."""
    declarations: dict[str, str] = {}
    for part in value.split(";"):
        name, sep, raw = part.partition(":")
        if sep:
            declarations[name.strip().lower()] = raw.replace("!important", "").strip().lower()
    return declarations


def parse_colour(value: str) -> Rgb | None:
    """An opaque colour in a CSS value, or None (transparent, unknown, not a colour)."""
    value = value.strip().lower()
    match = _HEX.search(value)
    if match:
        digits = match.group(1)
        if len(digits) in (3, 4):
            digits = "".join(c * 2 for c in digits)
        if len(digits) not in (6, 8):
            return None
        if len(digits) == 8 and int(digits[6:8], 16) == 0:
            return None
        return int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16)
    match = _FUNC.search(value)
    if match:
        return _parse_function(match.group(1), match.group(2))
    for word in re.findall(r"[a-z]+", value):
        if word in _NAMED:
            return _NAMED[word]
    return None


def _parse_function(name: str, arguments: str) -> Rgb | None:
    parts = [p for p in re.split(r"[\s,/]+", arguments.strip()) if p]
    if len(parts) < 3:
        return None
    try:
        if len(parts) >= 4 and _channel(parts[3], 1.0) == 0:
            return None
        if name.startswith("rgb"):
            red, green, blue = (round(_channel(p, 255.0)) for p in parts[:3])
            return red, green, blue
        hue = float(parts[0].removesuffix("deg")) / 360.0
        red_f, green_f, blue_f = colorsys.hls_to_rgb(
            hue % 1.0, _channel(parts[2], 1.0), _channel(parts[1], 1.0)
        )
        return round(red_f * 255), round(green_f * 255), round(blue_f * 255)
    except ValueError:
        return None


def _channel(text: str, scale: float) -> float:
    if text.endswith("%"):
        return float(text[:-1]) / 100.0 * scale
    return float(text)


def _background_of(style: dict[str, str]) -> Rgb | None:
    for key in ("background-color", "background"):
        if key in style:
            return parse_colour(style[key])
    return None


def _is_transparent(value: str) -> bool:
    """``transparent``, or a colour whose alpha channel is zero."""
    value = value.strip()
    if value == "transparent":
        return True
    match = _HEX.fullmatch(value)
    if match and len(match.group(1)) in (4, 8):
        alpha = match.group(1)[-1 if len(match.group(1)) == 4 else -2 :]
        return int(alpha, 16) == 0
    match = _FUNC.fullmatch(value)
    if match:
        parts = [p for p in re.split(r"[\s,/]+", match.group(2).strip()) if p]
        try:
            return len(parts) >= 4 and _channel(parts[3], 1.0) == 0
        except ValueError:
            return False
    return False


def _length(value: str) -> float | None:
    match = _LENGTH.match(value.strip())
    return float(match.group(1)) if match else None


def inherited_at(element: Element) -> Inherited:
    """The inline colour and background that ``element`` inherits from its ancestors."""
    color: Rgb | None = None
    background: Rgb | None = None
    for ancestor in reversed(list(element.iterancestors())):
        color, background = _apply(ancestor, color, background)
    return Inherited(color, background)


def _apply(
    element: Element, color: Rgb | None, background: Rgb | None
) -> tuple[Rgb | None, Rgb | None]:
    style = parse_style(element.get("style") or "")
    if "color" in style:
        color = parse_colour(style["color"]) or color
    own_background = _background_of(style)
    return color, own_background or background


def hidden_reason(element: Element, inherited: Inherited) -> str | None:
    """Why a reader cannot see ``element`` (``"display:none"``, ...), or None if visible."""
    if element.get("hidden") is not None:
        return "hidden attribute"
    if (element.get("aria-hidden") or "").strip().lower() == "true":
        return "aria-hidden"
    style = parse_style(element.get("style") or "")
    if not style:
        return _same_colour(inherited)
    if style.get("display") == "none":
        return "display:none"
    if style.get("visibility") in {"hidden", "collapse"}:
        return "visibility:hidden"
    if "font-size" in style and _ZERO.match(style["font-size"]):
        return "font-size:0"
    if "opacity" in style and _ZERO.match(style["opacity"]):
        return "opacity:0"
    if "color" in style and _is_transparent(style["color"]):
        return "transparent text"
    indent = _length(style.get("text-indent", ""))
    if indent is not None and indent <= _OFFSCREEN_PX:
        return "text-indent off-screen"
    if style.get("position") in {"absolute", "fixed"}:
        for side in ("left", "top"):
            offset = _length(style.get(side, ""))
            if offset is not None and offset <= _OFFSCREEN_PX:
                return "positioned off-screen"
    if style.get("overflow") == "hidden" and any(
        key in style and _ZERO.match(style[key]) for key in ("height", "max-height", "width")
    ):
        return "zero size"
    color, background = _apply(element, inherited.color, inherited.background)
    return _same_colour(Inherited(color, background))


def _same_colour(state: Inherited) -> str | None:
    if state.color is None or state.background is None:
        return None
    if all(
        abs(a - b) <= _SAME_COLOUR_DELTA for a, b in zip(state.color, state.background, strict=True)
    ):
        return "text in the background colour"
    return None


def drop_tree(element: Element) -> None:
    """Remove ``element`` and its content, keeping the text that follows it."""
    parent = element.getparent()
    if parent is None:
        return
    tail = element.tail
    if tail:
        previous = element.getprevious()
        if previous is not None:
            previous.tail = (previous.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
    parent.remove(element)


# Only these attributes can hide an element or set the colours that hide its text.
_CANDIDATES = etree.XPath(".//*[@style or @hidden or @aria-hidden]")


def remove_hidden(root: Element) -> list[tuple[str, str]]:
    """Remove hidden elements under ``root``.

    Returns ``(reason, text)`` for each removed element that had text. Only elements
    carrying a ``style``, ``hidden`` or ``aria-hidden`` attribute are examined (found by
    XPath, in document order), so a page without inline styles costs almost nothing.
    """
    removed: list[tuple[str, str]] = []
    top = root.getroottree().getroot()
    for element in _CANDIDATES(root):
        if not _attached(element, top):
            continue  # inside an element already removed
        reason = hidden_reason(element, inherited_at(element))
        if reason:
            # Joined without spaces: "ig<b>nore</b>" must read as the word a model would see.
            text = " ".join("".join(element.itertext()).split())
            if text:
                removed.append((reason, text))
            drop_tree(element)
    return removed


def _attached(element: Element, top: Element) -> bool:
    last = element
    for ancestor in element.iterancestors():
        last = ancestor
    return last is top


# Bounds on the work one page's stylesheets can cause.
_MAX_STYLE_RULES = 2000
_MAX_HIDING_RULES = 100  # each one is an XPath search of the page
_MAX_MARKED = 5000
_TRANSLATOR = HTMLTranslator()


def apply_hiding_rules(document: Element) -> int:
    """Copy the ``<style>`` rules that hide into the inline style of what they match.

    Run before ``remove_hidden`` (and before the ``<style>`` elements are dropped).
    The rule's declarations go first, so the element's own inline ones win.
    Returns how many elements were marked.
    """
    marked = 0
    rules_seen = 0
    hiding = 0
    for style in list(document.iter("style")):
        for rule in tinycss2.parse_stylesheet(
            style.text or "", skip_comments=True, skip_whitespace=True
        ):
            rules_seen += 1
            if rules_seen > _MAX_STYLE_RULES:
                return marked
            if rule.type != "qualified-rule":
                continue  # @media print, @font-face, ...: not what the reader sees
            declarations = "; ".join(
                f"{d.lower_name}: {tinycss2.serialize(d.value).strip()}"
                + (" !important" if d.important else "")
                for d in tinycss2.parse_declaration_list(
                    rule.content, skip_comments=True, skip_whitespace=True
                )
                if d.type == "declaration"
            )
            if not declarations or not _rule_hides(declarations):
                continue
            hiding += 1
            if hiding > _MAX_HIDING_RULES:
                return marked
            try:
                xpath = _TRANSLATOR.css_to_xpath(tinycss2.serialize(rule.prelude).strip())
                matches = document.xpath(xpath)
            except (SelectorError, etree.XPathError):
                continue  # a selector cssselect cannot express: the rule is not applied
            for element in matches:
                if marked >= _MAX_MARKED:
                    return marked
                if isinstance(element, Element):
                    element.set("style", f"{declarations}; {element.get('style') or ''}")
                    marked += 1
    return marked


def _rule_hides(declarations: str) -> bool:
    """Whether these declarations alone hide an element (no inherited colours)."""
    probe = etree.Element("span", style=declarations)
    return hidden_reason(probe, Inherited()) is not None
