"""CSS values as a browser reads them: inline declarations (escapes decoded, custom
properties resolved), colours (names, hex, ``rgb()`` / ``hsl()``, transparency) and
lengths.
"""

from __future__ import annotations

import colorsys
import re

import tinycss2

Rgb = tuple[int, int, int]

NAMED_COLOURS: dict[str, Rgb] = {
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
# A number with its unit, if any (``-9999px``, ``0.5em``, ``40%``).
LENGTH = re.compile(r"^(-?\d+(?:\.\d+)?)(px|pt|em|rem|%)?$")
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
        declarations = {k: resolve_variables(v, scope) for k, v in declarations.items()}
    return declarations


def resolve_variables(value: str, scope: dict[str, str], depth: int = 0) -> str:
    """``var(--x, fallback)`` replaced by the value of ``--x`` (a few levels deep)."""
    if "var(" not in value or depth > 5:
        return value

    def replace(match: re.Match[str]) -> str:
        found = scope.get(match.group(1).lower())
        return found if found is not None else (match.group(2) or "").strip()

    return resolve_variables(_VAR.sub(replace, value), scope, depth + 1)


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
        if word in NAMED_COLOURS:
            return NAMED_COLOURS[word]
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


def background_of(style: dict[str, str]) -> Rgb | None:
    """The opaque background colour a parsed style declares, if any."""
    for key in ("background-color", "background"):
        if key in style:
            return parse_colour(style[key])
    return None


def is_transparent(value: str) -> bool:
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


def parse_length(value: str) -> float | None:
    """The number of a length (``-9999px`` → -9999.0), or None if it is not one."""
    match = LENGTH.match(value.strip())
    return float(match.group(1)) if match else None
