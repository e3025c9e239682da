"""Web (corrective and adaptive, after the budget): search the web for evidence.

Runs only when the request asked for it (``web.enabled``) on a collection that
allows it (``Collection.web_fallback``), once the rewrites have not found
correct evidence. The provider's results are read through the SSRF guard,
checked by the prompt-injection validator and cut into passages marked "web";
they join the collection's best evidence for the answer and are never stored
in the collection. A provider that is down, slow or answers garbage is a trace
warning: the answer is then made from the collection's evidence, flagged
low-confidence as without the fallback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from query_app.exceptions import WebFallbackNotAllowed, WebSearchNotConfigured
from query_app.pipeline.stages.base import PipelineState, Stage, StageCheck
from query_app.pipeline.types import TraceStep
from query_app.pipeline.web import (
    WEB_PROVIDERS,
    WebSearchConfig,
    WebSearchFailed,
    web_passages,
)


def web_fallback_refusal(collection: Any) -> str:
    """Why ``collection`` may not use the web fallback ("" when it may)."""
    if collection is not None and not getattr(collection, "web_fallback", False):
        return (
            f"web fallback is not allowed on the collection {collection.slug!r}; "
            "an admin of the collection can allow it on its settings page"
        )
    return ""


class WebStage(Stage):
    name = "web"
    listed = frozenset({"pages"})

    def check(self, check: StageCheck) -> None:
        web = check.options.web
        if not web.enabled:
            return
        refusal = web_fallback_refusal(check.collection)
        if refusal:
            raise WebFallbackNotAllowed(refusal)
        if not WebSearchConfig.from_settings().configured:
            raise WebSearchNotConfigured(
                "web fallback was asked for, but this server has no web search configured "
                "(set RAG_WEB_SEARCH_URL to a SearxNG instance)"
            )

    def skip_reason(self, state: PipelineState) -> str:
        if not state.options.web.enabled:
            return "web fallback not asked for"
        return web_fallback_refusal(state.query.collection)

    def execute(self, state: PipelineState, step: TraceStep) -> PipelineState:
        web = state.options.web
        config = WebSearchConfig.from_settings()
        question = state.answer_question
        step.details.update({"provider": web.provider, "query": question, "outcome": "none"})
        try:
            results = WEB_PROVIDERS.get(web.provider)().search(
                question, config=config, limit=web.max_results
            )
        except WebSearchFailed as exc:
            step.warn(f"web search failed ({exc}); answered from the collection's evidence")
            return state
        except Exception as exc:  # a provider's own bug is still only a warning
            step.warn(
                f"web search failed ({type(exc).__name__}: {exc}); "
                "answered from the collection's evidence"
            )
            return state
        harvest = web_passages(results, question=question, options=web, config=config)
        step.warnings += harvest.warnings
        step.details.update(
            {
                "results": len(results),
                "pages": harvest.pages,
                "passages": len(harvest.candidates),
            }
        )
        if not harvest.candidates:
            step.warn(
                f"web search gave {len(results)} result(s) but no usable passage; "
                "answered from the collection's evidence"
            )
            return state
        step.details["outcome"] = "found"
        top_n = state.options.rerank.top_n
        web_kept = harvest.candidates[:top_n]
        kept = (*web_kept, *state.kept)[: max(top_n, len(web_kept))]
        return state.with_(kept=tuple(kept), notes={**state.notes, "web_passages": len(web_kept)})

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        if "results" not in details:
            return ["no results"]
        return [f"{details.get('results', 0)} results", f"{details.get('passages', 0)} passages"]
