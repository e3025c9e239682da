"""Asking a collection as a user, and reading a stage's trace details, in query tests."""

from __future__ import annotations

from typing import Any

from query_app.services import QueryRequest, query_answer


def ask(user: Any, collection: str, question: str, **overrides: object) -> Any:
    """The stored run of ``question`` asked of ``collection`` by ``user``."""
    request = QueryRequest(collection=collection, question=question, overrides=overrides or None)
    return query_answer(user=user, request=request)


def stage_details(run: Any, stage: str) -> dict[str, Any]:
    """The trace details of the run's ``stage`` step."""
    return next(s for s in run.trace if s["stage"] == stage)["details"]
