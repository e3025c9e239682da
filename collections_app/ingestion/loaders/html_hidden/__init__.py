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

The CSS values are read in ``css.py``, one element is judged in ``visibility.py``,
and the page's ``<style>`` rules are applied in ``stylesheets.py``; this module
removes what is hidden.
"""

from __future__ import annotations

from lxml import etree

from .css import Rgb, parse_colour, parse_style
from .stylesheets import apply_hiding_rules, style_context
from .visibility import Element, Inherited, StyleContext, hidden_reason, inherited_at

__all__ = [
    "Element",
    "Inherited",
    "Rgb",
    "StyleContext",
    "apply_hiding_rules",
    "drop_tree",
    "hidden_reason",
    "inherited_at",
    "parse_colour",
    "parse_style",
    "remove_hidden",
    "style_context",
]


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
