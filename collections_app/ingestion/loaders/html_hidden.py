"""Finding HTML elements a reader cannot see.

Hidden text is the classic carrier of prompt injection: a page looks harmless in the
browser while the model reads "ignore previous instructions". Elements hidden by the
``hidden`` attribute, ``aria-hidden``, or inline styles (``display:none``,
``visibility:hidden``, zero size or opacity, off-screen positioning, text in the
background colour) are removed from the indexed text and handed to the validator.

Rules of the page's own ``<style>`` elements that hide by themselves (``.promo {
display: none }``) are applied first, as inline styles of the elements their
selectors match (tinycss2 parses the CSS, cssselect turns selectors into XPath);
inline declarations still win, as in a browser, unless the rule is ``!important``.
Rules inside ``@media`` blocks for every screen (``screen``, ``all``, no condition),
``@layer`` and ``@supports`` apply; ``@media print`` and width-dependent blocks do
not. CSS escapes (``disp\\lay``) are decoded and custom properties (``var(--x)``)
resolved as a browser would. Besides the classic tricks, text is hidden by a font
of at most 2 px, ``transform: scale(0)``, a zero ``clip`` rectangle, a ``clip-path``
that cuts everything, and white text (``<font color=white>``, inline colour) on a
page that sets no background and links no stylesheet (so the background is white).
External stylesheets are never fetched: text hidden only through them stays in the
indexed text, where the injection validator still reads it as visible text.
"""

from __future__ import annotations

import colorsys
import re
from dataclasses import dataclass, field
from typing import Any

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


@dataclass(frozen=True)
class StyleContext:
    """What the whole page's CSS says beyond single rules.

    ``variables``: custom properties declared by the page's rules (``--gone: none``).
    ``background``: the page background when the page leaves it to the browser
    (white), None when a stylesheet may set it (then only declared colours count).
    """

    variables: dict[str, str] = field(default_factory=dict)
    background: Rgb | None = None


_PAGE_BACKGROUND = re.compile(r"(?:^|[\s,}])(?:html|body|:root|\*)\b[^{]*\{[^}]*background", re.I)


def style_context(document: Element) -> StyleContext:
    """Custom properties of the page's ``<style>`` rules, and its background if it is white."""
    variables: dict[str, str] = {}
    styles = [style.text or "" for style in document.iter("style")]
    for css in styles:
        for rule in _rules(css):
            for item in tinycss2.parse_declaration_list(
                rule.content or [], skip_comments=True, skip_whitespace=True
            ):
                if item.type == "declaration" and item.name.startswith("--"):
                    variables[item.name.lower()] = tinycss2.serialize(item.value).strip().lower()
    linked = any("stylesheet" in (link.get("rel") or "").lower() for link in document.iter("link"))
    declared = any(_PAGE_BACKGROUND.search(css) for css in styles) or any(
        element.get("bgcolor") or "background" in (element.get("style") or "").lower()
        for element in document.iter("html", "body")
    )
    background = None if linked or declared else _NAMED["white"]
    return StyleContext(variables=variables, background=background)


_VAR = re.compile(r"var\(\s*(--[\w-]+)\s*(?:,\s*([^()]*))?\)")


def parse_style(value: str, variables: dict[str, str] | None = None) -> dict[str, str]:
    """``"color: #FFF; display:none !important"`` → ``{"color": "#fff", "display": "none"}``.

    CSS escapes (``disp\\lay``) are decoded and ``var(--name, fallback)`` resolved
    from the element's own custom properties, then ``variables`` (the page's).
    """
    declarations: dict[str, str] = {}
    if "\\" in value or "/*" in value:
        for item in tinycss2.parse_declaration_list(
            value, skip_comments=True, skip_whitespace=True
        ):
            if item.type == "declaration":
                declarations[item.lower_name] = tinycss2.serialize(item.value).strip().lower()
    else:
        for part in value.split(";"):
            name, sep, raw = part.partition(":")
            if sep:
                declarations[name.strip().lower()] = raw.replace("!important", "").strip().lower()
    if "var(" in value:
        own = {k: v for k, v in declarations.items() if k.startswith("--")}
        scope = {**(variables or {}), **own}
        declarations = {k: _resolve(v, scope) for k, v in declarations.items()}
    return declarations


def _resolve(value: str, scope: dict[str, str], depth: int = 0) -> str:
    """``var(--x, fallback)`` replaced by the value of ``--x`` (a few levels deep)."""
    if "var(" not in value or depth > 5:
        return value

    def replace(match: re.Match[str]) -> str:
        found = scope.get(match.group(1).lower())
        return found if found is not None else (match.group(2) or "").strip()

    return _resolve(_VAR.sub(replace, value), scope, depth + 1)


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


def inherited_at(element: Element, context: StyleContext | None = None) -> Inherited:
    """The inline colour and background that ``element`` inherits from its ancestors."""
    color: Rgb | None = None
    background: Rgb | None = context.background if context is not None else None
    variables = context.variables if context is not None else None
    for ancestor in reversed(list(element.iterancestors())):
        color, background = _apply(ancestor, color, background, variables)
    return Inherited(color, background)


def _apply(
    element: Element,
    color: Rgb | None,
    background: Rgb | None,
    variables: dict[str, str] | None = None,
) -> tuple[Rgb | None, Rgb | None]:
    style = parse_style(element.get("style") or "", variables)
    # <font color=…> and bgcolor=… are presentational attributes: CSS wins over them.
    attribute_colour = element.get("color") if element.tag == "font" else None
    if "color" in style:
        color = parse_colour(style["color"]) or color
    elif attribute_colour:
        color = parse_colour(attribute_colour) or color
    own_background = _background_of(style)
    if own_background is None and element.get("bgcolor"):
        own_background = parse_colour(element.get("bgcolor") or "")
    return color, own_background or background


_SCALE_ZERO = re.compile(
    r"\bscale[xyz3d]*\(\s*-?0*\.?0+\s*(?:[,)\s])|\bmatrix\(\s*-?0*\.?0+\s*,\s*[^,]+,\s*[^,]+,\s*-?0*\.?0+\s*,"
)
_CLIP_RECT = re.compile(r"rect\(([^)]*)\)")
_CLIP_PATH_ALL = re.compile(
    r"inset\(\s*(?:[5-9]\d|\d{3,})(?:\.\d+)?%|circle\(\s*0*\.?0+(?:px|%)?\s*[)a-z]"
    r"|ellipse\(\s*0*\.?0+(?:px|%)?\s"
)
# A font this small is a dot on the screen, not text (12-16 px is usual).
_TINY_FONT_PX = 2.0


def _tiny_font(value: str) -> bool:
    match = _LENGTH.match(value.strip())
    if not match:
        return False
    size, unit = float(match.group(1)), match.group(2) or "px"
    px = {"px": 1.0, "pt": 4 / 3, "em": 16.0, "rem": 16.0, "%": 0.16}.get(unit, 1.0) * size
    return px <= _TINY_FONT_PX


def _clipped_away(style: dict[str, str]) -> bool:
    """``clip: rect(0 0 0 0)`` on a positioned element (the box is cut to nothing)."""
    match = _CLIP_RECT.search(style.get("clip", ""))
    if not match or style.get("position") not in {"absolute", "fixed"}:
        return False
    parts = [p for p in re.split(r"[\s,]+", match.group(1).strip()) if p]
    lengths = [_length(p) if p != "auto" else None for p in parts]
    if len(lengths) != 4 or any(v is None for v in lengths):
        return False
    top, right, bottom, left = (float(v or 0) for v in lengths)
    return bottom - top <= 1 or right - left <= 1


def hidden_reason(
    element: Element, inherited: Inherited, variables: dict[str, str] | None = None
) -> str | None:
    """Why a reader cannot see ``element`` (``"display:none"``, ...), or None if visible."""
    if element.get("hidden") is not None:
        return "hidden attribute"
    if (element.get("aria-hidden") or "").strip().lower() == "true":
        return "aria-hidden"
    style = parse_style(element.get("style") or "", variables)
    if not style:
        color, background = _apply(element, inherited.color, inherited.background, variables)
        return _same_colour(Inherited(color, background))
    if style.get("display") == "none":
        return "display:none"
    if style.get("visibility") in {"hidden", "collapse"}:
        return "visibility:hidden"
    if "font-size" in style and _ZERO.match(style["font-size"]):
        return "font-size:0"
    if "font-size" in style and _tiny_font(style["font-size"]):
        return "font-size of at most 2px"
    if _SCALE_ZERO.search(style.get("transform", "")) or _SCALE_ZERO.search(
        style.get("scale", "") and f"scale({style['scale']})"
    ):
        return "transform:scale(0)"
    if _clipped_away(style):
        return "clip:rect(0 0 0 0)"
    if _CLIP_PATH_ALL.search(style.get("clip-path", "")):
        return "clip-path cutting everything"
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
    color, background = _apply(element, inherited.color, inherited.background, variables)
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
_CANDIDATES = etree.XPath(".//*[@style or @hidden or @aria-hidden or (self::font and @color)]")


def remove_hidden(root: Element, context: StyleContext | None = None) -> list[tuple[str, str]]:
    """Remove hidden elements under ``root``.

    Returns ``(reason, text)`` for each removed element that had text. Only elements
    carrying a ``style``, ``hidden``, ``aria-hidden`` or ``<font color>`` attribute are
    examined (found by XPath, in document order), so a page without inline styles costs
    almost nothing.
    """
    removed: list[tuple[str, str]] = []
    top = root.getroottree().getroot()
    variables = context.variables if context is not None else None
    for element in _CANDIDATES(root):
        if not _attached(element, top):
            continue  # inside an element already removed
        reason = hidden_reason(element, inherited_at(element, context), variables)
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


# @media conditions that hold on every screen.
_EVERY_SCREEN = re.compile(
    r"^(?:only\s+)?(?:screen|all)?(?:\s*(?:and\s+)?\(\s*min-(?:width|height)\s*:\s*0+(?:px|em)?\s*\))*$"
)


def _rules(css: str, depth: int = 0) -> list[Any]:
    """The qualified rules a screen applies: top level, and inside @layer, @supports and
    @media blocks for every screen (``@media print`` or ``(max-width: …)`` is not every
    reader's view)."""
    found: list[Any] = []
    for rule in tinycss2.parse_stylesheet(css, skip_comments=True, skip_whitespace=True):
        if rule.type == "qualified-rule":
            found.append(rule)
        elif rule.type == "at-rule" and rule.content is not None and depth < 4:
            keyword = rule.lower_at_keyword
            prelude = " ".join(tinycss2.serialize(rule.prelude).split()).lower()
            every_screen = keyword == "media" and any(
                _EVERY_SCREEN.match(query.strip()) for query in prelude.split(",")
            )
            if keyword in {"layer", "supports"} or every_screen:
                found += _rules(tinycss2.serialize(rule.content), depth + 1)
        if len(found) > _MAX_STYLE_RULES:
            break
    return found


def apply_hiding_rules(document: Element, context: StyleContext | None = None) -> int:
    """Copy the ``<style>`` rules that hide into the inline style of what they match.

    Run before ``remove_hidden`` (and before the ``<style>`` elements are dropped).
    The rule's declarations go first, so the element's own inline ones win, except
    ``!important`` ones, which go last and win, as in a browser.
    Returns how many elements were marked.
    """
    marked = 0
    rules_seen = 0
    hiding = 0
    variables = context.variables if context is not None else {}
    for style in list(document.iter("style")):
        for rule in _rules(style.text or ""):
            rules_seen += 1
            if rules_seen > _MAX_STYLE_RULES:
                return marked
            items = [
                d
                for d in tinycss2.parse_declaration_list(
                    rule.content, skip_comments=True, skip_whitespace=True
                )
                if d.type == "declaration" and not d.name.startswith("--")
            ]
            normal = "; ".join(
                f"{d.lower_name}: {_resolve(tinycss2.serialize(d.value).strip(), variables)}"
                for d in items
                if not d.important
            )
            important = "; ".join(
                f"{d.lower_name}: {_resolve(tinycss2.serialize(d.value).strip(), variables)}"
                for d in items
                if d.important
            )
            declarations = "; ".join(part for part in (normal, important) if part)
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
                    inline = element.get("style") or ""
                    element.set("style", f"{normal}; {inline}; {important}".strip("; "))
                    marked += 1
    return marked


def _rule_hides(declarations: str) -> bool:
    """Whether these declarations alone hide an element (no inherited colours)."""
    probe = etree.Element("span", style=declarations)
    return hidden_reason(probe, Inherited()) is not None
