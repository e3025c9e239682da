"""The page's own ``<style>`` elements: custom properties and the page background
(``style_context``), and rules that hide by themselves copied onto the elements their
selectors match (``apply_hiding_rules``).
"""

from __future__ import annotations

import re
from typing import Any

import tinycss2
from cssselect import HTMLTranslator, SelectorError
from lxml import etree

from .css import NAMED_COLOURS, resolve_variables
from .visibility import Element, Inherited, StyleContext, hidden_reason

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
    background = None if linked or declared else NAMED_COLOURS["white"]
    return StyleContext(variables=variables, background=background)


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
                f"{d.lower_name}: {resolve_variables(tinycss2.serialize(d.value).strip(), variables)}"
                for d in items
                if not d.important
            )
            important = "; ".join(
                f"{d.lower_name}: {resolve_variables(tinycss2.serialize(d.value).strip(), variables)}"
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
