"""The assemble stage: fit ranked passages into a hard token budget and lay them out.

The budget is never overrun: passages are taken in rank order and one that
does not fit is dropped (and counted); a later, shorter one may still fit.
Only when not even the best passage fits is it cut to the budget, so a huge
chunk never turns an answerable question into a refusal.

Citation numbers are rank-based ([1] = best) whatever the layout:
``edges`` puts the strongest passages at both ends of the prompt, where models
attend most (r1, r3, r5, …, r6, r4, r2); ``linear`` keeps rank order.

Small-to-big (``context.expand``): a passage may be given to the model as the
window or section around it (:mod:`query_app.pipeline.context_window`); one
whose window does not fit is given alone. Its citation, snippet and highlights
stay on the retrieved passage itself.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from query_app.exceptions import UnknownOrdering
from query_app.pipeline.context_window import Window
from query_app.pipeline.options import ContextOptions
from query_app.pipeline.prompts import passage_block
from query_app.pipeline.types import Candidate, Citation
from ragsite.registry import Registry

SNIPPET_CHARS = 300
# "<passages>\n" + "\n</passages>\n" around the blocks.
_WRAPPER_CHARS = len("<passages>\n") + len("\n</passages>\n")


def edges_layout(n: int) -> list[int]:
    """Rank indexes in prompt order: 0, 2, 4, … then …, 5, 3, 1."""
    head = list(range(0, n, 2))
    tail = list(range(1, n, 2))
    return head + tail[::-1]


def linear_layout(n: int) -> list[int]:
    return list(range(n))


# Name → layout function: rank indexes in prompt order for n passages.
ORDERINGS: Registry[Callable[[int], list[int]]] = Registry("ordering", unknown=UnknownOrdering)
ORDERINGS.add("edges", edges_layout)
ORDERINGS.add("linear", linear_layout)


def estimate_tokens(text: str, chars_per_token: float) -> int:
    """Tokens a chat model will see for ``text`` (conservative: rounded up)."""
    return math.ceil(len(text) / chars_per_token) if text else 0


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    if len(flat) <= limit:
        return flat
    cut = flat[:limit].rsplit(" ", 1)[0]
    return cut + "…"


@dataclass
class Passage:
    """A candidate admitted to the context, with its citation number."""

    marker: int
    candidate: Candidate
    # What the model reads: the candidate's text, a prefix of it when cut to the
    # budget, or the window around it (small-to-big).
    text: str
    block: str  # as rendered in the prompt
    tokens: int
    window: Window | None = None

    @property
    def char_start(self) -> int:
        """Where ``text`` starts in the document."""
        return self.window.char_start if self.window is not None else self.candidate.char_start

    def spans(self, offsets: list[tuple[int, int]]) -> list[dict[str, Any]]:
        """Spans of this passage (offsets into its text) as a citation carries them.

        ``start``/``end`` are offsets into the cited chunk's text; with a window,
        spans are clipped to the chunk (highlights stay on the cited passage) and
        one wholly outside it is left out.
        """
        c = self.candidate
        base = self.char_start
        found = []
        for start, end in offsets:
            low, high = base + start, base + end
            if self.window is not None:
                low, high = max(low, c.char_start), min(high, c.char_end)
                if low >= high:
                    continue
            found.append(
                {
                    "text": self.text[low - base : high - base],
                    "start": low - c.char_start,
                    "end": high - c.char_start,
                    "char_start": low,
                    "char_end": high,
                    "page": c.page,
                }
            )
        return found

    def citation(self) -> Citation:
        c = self.candidate
        cited = c.text if self.window is not None else self.text
        return Citation(
            marker=self.marker,
            chunk_id=c.chunk_id,
            source=c.source_location,
            source_id=c.source_id,
            title=c.source_name,
            snippet=snippet(cited),
            score=c.score,
            char_start=c.char_start,
            char_end=c.char_start + len(cited) if cited != c.text else c.char_end,
            page=c.page,
            section_path=list(c.section_path),
        )


@dataclass
class AssembledContext:
    passages: list[Passage] = field(default_factory=list)  # rank order, marker = index + 1
    layout: list[int] = field(default_factory=list)  # markers in prompt order
    tokens: int = 0
    budget: int = 0
    dropped: int = 0

    def blocks(self) -> list[str]:
        """Rendered passages in prompt (layout) order."""
        by_marker = {p.marker: p for p in self.passages}
        return [by_marker[m].block for m in self.layout]

    def citations(self) -> list[Citation]:
        return [p.citation() for p in self.passages]


def assemble(
    candidates: list[Candidate],
    *,
    options: ContextOptions,
    windows: Mapping[str, Window] | None = None,
) -> tuple[AssembledContext, dict[str, Any], list[str]]:
    """Admit candidates in rank order under the budget; return context, details, warnings.

    ``windows`` holds, per chunk id, the text to give the model instead of the
    passage alone (small-to-big); a window that does not fit falls back to the passage.
    """
    cpt = options.chars_per_token
    budget = options.max_tokens
    used = estimate_tokens("x" * _WRAPPER_CHARS, cpt)
    passages: list[Passage] = []
    dropped = 0
    alone = 0  # windows that did not fit, given as the passage alone
    warnings: list[str] = []
    for cand in candidates:
        marker = len(passages) + 1
        window = (windows or {}).get(cand.chunk_id)
        if window is not None:
            block = passage_block(marker, cand, window.text)
            tokens = estimate_tokens(block, cpt) + 1
            if used + tokens <= budget:
                passages.append(Passage(marker, cand, window.text, block, tokens, window))
                used += tokens
                continue
            alone += 1
        block = passage_block(marker, cand)
        # +1 for the newline joining blocks.
        tokens = estimate_tokens(block, cpt) + 1
        if used + tokens <= budget:
            passages.append(Passage(marker, cand, cand.text, block, tokens))
            used += tokens
        else:
            dropped += 1
    if not passages and candidates:
        best = candidates[0]
        text = _cut_to_fit(best, budget - used, cpt)
        if text:
            block = passage_block(1, best, text)
            tokens = estimate_tokens(block, cpt) + 1
            passages.append(Passage(1, best, text, block, tokens))
            used += tokens
            dropped -= 1
            warnings.append(
                f"the best passage alone exceeds the {budget}-token budget; it was cut to fit"
            )
    layout = [i + 1 for i in ORDERINGS.get(options.ordering)(len(passages))]
    context = AssembledContext(
        passages=passages,
        layout=layout,
        tokens=used if passages else 0,
        budget=budget,
        dropped=dropped,
    )
    details = {
        "chunks": len(passages),
        "dropped_by_budget": dropped,
        "tokens": context.tokens,
        "budget": budget,
        "ordering": options.ordering,
        "layout": layout,
        "token_estimate": f"ceil(characters / {cpt:g})",
    }
    if options.expand != "chunk":
        details["expand"] = {
            "kind": options.expand,
            "window": options.window,
            "max_tokens": options.expand_max_tokens,
            "expanded": sum(1 for p in passages if p.window is not None),
            "alone_by_budget": alone,
            # Which text each passage was given: its marker, chunk, ordinals and characters.
            "passages": [
                {"marker": p.marker, **p.window.trace(p.candidate.chunk_id)}
                for p in passages
                if p.window is not None
            ],
        }
    return context, details, warnings


def _cut_to_fit(candidate: Candidate, tokens_left: int, cpt: float) -> str:
    """The longest word-boundary prefix of the passage whose block fits ``tokens_left``."""
    overhead = estimate_tokens(passage_block(1, candidate, ""), cpt) + 2
    chars = int((tokens_left - overhead) * cpt)
    if chars <= 0:
        return ""
    text = candidate.text[:chars]
    if len(text) < len(candidate.text) and " " in text:
        text = text.rsplit(" ", 1)[0]
    while text and estimate_tokens(passage_block(1, candidate, text), cpt) + 1 > tokens_left:
        text = text[: max(0, len(text) - 16)]
    return text
