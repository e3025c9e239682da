"""Stored answers: every question asked, with its evidence and its trace."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from collections_app.models import Collection
from query_app.pipeline.types import MODE_LABELS


class Conversation(models.Model):
    """Questions asked one after another about one collection; each turn is a QueryRun.

    A follow-up is read in the light of the turns before it (the condense stage
    rewrites it to stand alone). Only its owner may continue it.
    """

    TITLE_CHARS = 200

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations"
    )
    collection = models.ForeignKey(
        Collection, on_delete=models.CASCADE, related_name="conversations"
    )
    # The first question (shortened to TITLE_CHARS).
    title = models.CharField(max_length=TITLE_CHARS)
    # Set explicitly (not auto_now) so that stored runs can be backfilled with their times.
    created_at = models.DateTimeField(default=timezone.now)
    # When the last turn was asked.
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [
            models.Index(fields=["owner", "-updated_at"], name="conversation_owner_recent"),
        ]

    def __str__(self) -> str:
        return self.title

    @classmethod
    def title_for(cls, question: str) -> str:
        """The first question as a title: one line, at most TITLE_CHARS characters."""
        line = " ".join(question.split())
        return line if len(line) <= cls.TITLE_CHARS else line[: cls.TITLE_CHARS - 1] + "…"


class QueryRun(models.Model):
    """One question answered (or refused) against one collection with one profile.

    Citations and the trace are snapshots: the run can be reopened, shared and
    re-run with another profile even after the collection changed.
    """

    class Mode(models.TextChoices):
        LLM = "llm", "Generated"
        EXTRACTIVE = "extractive", "Extractive"
        NOT_FOUND = "not-found", "Not found"
        RETRIEVAL_ONLY = "retrieval-only", "Retrieval only"
        FAILED = "failed", "Failed"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="query_runs",
    )
    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="query_runs")
    # The conversation this run is a turn of (None: a question asked on its own,
    # e.g. from the command line or by evaluation).
    conversation = models.ForeignKey(
        Conversation,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="turns",
    )
    question = models.TextField()
    # A follow-up's question as retrieval read it (rewritten to stand alone); "" otherwise.
    standalone_question = models.TextField(blank=True)
    profile = models.CharField(max_length=50)
    # The fully resolved options tree (preset + settings + request overrides).
    options = models.JSONField(default=dict)
    # What the request overrode, to re-run it faithfully with another profile.
    overrides = models.JSONField(default=dict, blank=True)
    answer = models.TextField(blank=True)
    mode = models.CharField(max_length=20, choices=Mode.choices)
    # [{"marker", "chunk_id", "source", "source_id", "title", "snippet", "score",
    #   "char_start", "char_end", "page", "section_path", "cited"}]
    citations = models.JSONField(default=list, blank=True)
    # [{"stage", "duration_ms", "skipped", "details", "warnings"}]
    trace = models.JSONField(default=list, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    groundedness = models.JSONField(null=True, blank=True)
    # {"total_ms": float, "stages": {stage: ms}}
    timings = models.JSONField(default=dict, blank=True)
    total_ms = models.FloatField(default=0.0)
    retrieval_only = models.BooleanField(default=False)
    allow_fallback = models.BooleanField(default=True)
    model_calls = models.PositiveIntegerField(default=0)
    # The collection's index version the passages came from.
    index_version = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    # Set by the code that stores the run (not auto_now_add): a run written later
    # by the run writer keeps the time its answer was given.
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user", "-created_at"], name="queryrun_user_recent"),
            models.Index(fields=["collection", "-created_at"], name="queryrun_coll_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.question[:60]} ({self.profile}, {self.mode})"

    @property
    def failed(self) -> bool:
        return bool(self.error)

    def as_payload(self) -> dict[str, Any]:
        """The JSON shape the API, the CLI and the browser all use."""
        return {
            "id": self.pk,
            "collection": self.collection.slug,
            "question": self.question,
            "conversation": self.conversation_id,
            "standalone_question": self.standalone_question,
            "profile": self.profile,
            "answer": self.answer,
            "mode": self.mode,
            "mode_label": MODE_LABELS.get(self.mode, self.get_mode_display()),
            "citations": self.citations,
            "trace": self.trace,
            "warnings": self.warnings,
            "groundedness": self.groundedness,
            "timings": self.timings,
            "retrieval_only": self.retrieval_only,
            "model_calls": self.model_calls,
            "index_version": self.index_version,
            "options": self.options,
            "error": self.error,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            # The corrective and adaptive graphs: a best-effort answer, the route taken.
            **_graph_flags(self.trace or []),
        }


class ModelSettings(models.Model):
    """The chat server and cross-encoder an administrator chose in the browser (one row).

    Environment variables win over these values, field by field; what applies is
    resolved by ``query_app.model_settings``. The API key is stored encrypted
    (Fernet, with a key derived from SECRET_KEY) and is never shown back.
    """

    SINGLETON_ID = 1

    chat_base_url = models.CharField(max_length=500, blank=True)
    chat_model = models.CharField(max_length=200, blank=True)
    # A Fernet token; empty when no key is stored.
    chat_api_key_encrypted = models.TextField(blank=True)
    # A cross-encoder directory or a model id of the local Hugging Face cache.
    rerank_model = models.CharField(max_length=1000, blank=True)
    # Bumped on every save: processes compare it to drop what they resolved before.
    version = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        verbose_name = "model settings"
        verbose_name_plural = "model settings"

    def __str__(self) -> str:
        return f"model settings v{self.version}"

    @property
    def chat_api_key_set(self) -> bool:
        return bool(self.chat_api_key_encrypted)


def _graph_flags(trace: list[dict[str, Any]]) -> dict[str, Any]:
    from query_app.pipeline.graph import graph_flags

    return graph_flags(trace)
