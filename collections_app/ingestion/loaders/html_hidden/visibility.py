"""Whether one element can be seen: its ``hidden`` / ``aria-hidden`` attributes, its
inline style (display, visibility, size, opacity, clipping, position, a tiny font) and
the colours it inherits (text in the background colour).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lxml import etree

from .css import (
    LENGTH,
    Rgb,
    background_of,
    is_transparent,
    parse_colour,
    parse_length,
    parse_style,
)

Element = etree._Element

_ZERO = re.compile(r"^-?0*\.?0*(?:px|pt|em|rem|ex|ch|vw|vh|%)?$")
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
    own_background = background_of(style)
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
    match = LENGTH.match(value.strip())
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
    lengths = [parse_length(p) if p != "auto" else None for p in parts]
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
    if "color" in style and is_transparent(style["color"]):
        return "transparent text"
    indent = parse_length(style.get("text-indent", ""))
    if indent is not None and indent <= _OFFSCREEN_PX:
        return "text-indent off-screen"
    if style.get("position") in {"absolute", "fixed"}:
        for side in ("left", "top"):
            offset = parse_length(style.get(side, ""))
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
