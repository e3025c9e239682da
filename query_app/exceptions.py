"""Errors of the answering pipeline, each with a message fit to show a user.

Surfaces (views, API, CLI) translate them to clear 4xx responses or one-line
messages; nothing here should ever become a bare 500.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class QueryError(Exception):
    """Base class: the question could not be answered; the message says why."""


class InvalidQuery(QueryError):
    """Bad input from the caller (empty or over-long question, bad option value)."""


class EmptyQuestion(InvalidQuery):
    """The question is empty or only whitespace."""


class QuestionTooLong(InvalidQuery):
    """The question exceeds the configured length limit."""


class ConversationMismatch(InvalidQuery):
    """A follow-up names a conversation about another collection than the one asked."""


class InvalidOption(InvalidQuery):
    """An option has a value outside its allowed range or of the wrong type."""


class TopNOutOfRange(InvalidOption):
    """top_n is below 1 or above the configured maximum."""


class UnknownOption(InvalidOption):
    """An override names an option that does not exist; the message lists the known ones."""


class OptionNotAllowed(InvalidOption):
    """An override only administrators may set (it names a file on the server, say)."""


class UnknownComponent(InvalidQuery):
    """A named component (profile, reranker, transform, ...) does not exist.

    The message always lists the known names, so a typo is a one-look fix.
    """

    kind = "component"

    def __init__(self, name: str, known: Iterable[str], *, note: str = "") -> None:
        self.name = name
        self.known = sorted(known)
        message = f"unknown {self.kind} {name!r}; known {self.kind}s: {', '.join(self.known)}"
        if note:
            message = f"{message} ({note})"
        super().__init__(message)


class UnknownProfile(UnknownComponent):
    kind = "profile"


class UnknownReranker(UnknownComponent):
    kind = "reranker"


class UnknownTransform(UnknownComponent):
    kind = "transform"


class UnknownRetrievalMode(UnknownComponent):
    kind = "retrieval mode"


class UnknownKeywordRanking(UnknownComponent):
    kind = "keyword ranking"


class UnknownOrdering(UnknownComponent):
    kind = "ordering"


class UnknownGenerator(UnknownComponent):
    kind = "generator"


class UnknownGroundednessChecker(UnknownComponent):
    kind = "groundedness checker"


class UnknownStage(UnknownComponent):
    kind = "stage"


class UnknownWebSearchProvider(UnknownComponent):
    kind = "web search provider"


class WebFallbackNotAllowed(InvalidQuery):
    """Web search was asked for where it may not run (the collection or profile does not allow it)."""


class ConfigurationError(QueryError):
    """The deployment lacks something the requested options need (a model, a key).

    ``without`` holds the option overrides that run the same profile without the
    missing part, when there is such a way (e.g. no reranker instead of a missing
    cross-encoder), and ``without_note`` says so in words; callers decide whether
    to accept it (evaluation's ``--without-cross-encoder``).
    """

    def __init__(
        self, message: str, *, without: dict[str, Any] | None = None, without_note: str = ""
    ) -> None:
        super().__init__(message)
        self.without = dict(without or {})
        self.without_note = without_note


class RerankerNotConfigured(ConfigurationError):
    """The cross-encoder reranker was asked for but no model is configured."""


class RerankerModelError(ConfigurationError):
    """The configured reranker model could not be loaded."""


class ChatNotConfigured(ConfigurationError):
    """An LLM-backed component was required but no chat model is configured."""


class WebSearchNotConfigured(ConfigurationError):
    """Web search was asked for but no search provider address is configured."""


class EmbeddingProfileMismatch(ConfigurationError):
    """The collection was indexed with another embedding model than the active one."""


class GenerationFailed(QueryError):
    """The chat model failed while answering (down, timeout, garbage) and no fallback was allowed.

    Raised by any LLM-backed stage (transform, llm reranker, generation); the
    message says which.
    """
