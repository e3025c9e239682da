"""Stored evaluation runs: what was asked, how it went, and every case's evidence.

An ``EvalRun`` is one comparison of one or more profiles on one dataset; it keeps
the configuration snapshot (resolved options per profile, code version, dataset
content hash) so a figure on the dashboard can always be traced back to what
produced it. Each (profile, case) pair is one ``EvalCaseResult`` with its
per-case metrics, the ranking it was scored on, the answer and the trace.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class EvalRun(models.Model):
    """One evaluation of profiles on a dataset; its progress is polled by pages."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    FINISHED = frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED})

    dataset_name = models.CharField(max_length=200, db_index=True)
    # The YAML file, or the BEIR directory.
    dataset_path = models.TextField()
    dataset_format = models.CharField(max_length=20, default="golden-yaml")
    # SHA-256 of the dataset file and every corpus file: same hash, same data.
    content_hash = models.CharField(max_length=64, blank=True)
    collection = models.ForeignKey(
        "collections_app.Collection",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="eval_runs",
    )
    # What was asked, enough to execute a queued run: {"compare": [...], "limit": ...}.
    request = models.JSONField(default=dict, blank=True)
    # Profile labels in comparison order ("fast", "balanced:rerank.kind=none", ...).
    profiles = models.JSONField(default=list, blank=True)
    # {label: {"profile", "overrides", "options", "ranking_overrides", "substituted"}}
    options = models.JSONField(default=dict, blank=True)
    # {label: reason} for requested profiles that could not run.
    unavailable = models.JSONField(default=dict, blank=True)
    code_version = models.CharField(max_length=100, blank=True)
    offline = models.BooleanField(default=False)
    k_values = models.JSONField(default=list, blank=True)
    # Passages of each profile's ranking scored by the retrieval metrics.
    depth = models.PositiveIntegerField(default=50)

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    cancel_requested = models.BooleanField(default=False)
    # Progress in (case, profile) pairs.
    pairs_total = models.PositiveIntegerField(default=0)
    pairs_done = models.PositiveIntegerField(default=0)
    current = models.TextField(blank=True, help_text="What the run is working on now")
    # Summary of the corpus ingestion, failed and quarantined sources listed.
    ingestion = models.JSONField(default=dict, blank=True)
    # {label: {metric: {"mean", "low", "high", "n"} | {"value", ...}}}
    aggregates = models.JSONField(default=dict, blank=True)
    # {"reference": label, "pairs": [...], "baseline": {...}}
    comparisons = models.JSONField(default=dict, blank=True)
    # {label: {stage: count}}
    failure_stages = models.JSONField(default=dict, blank=True)
    # {label: {"answers": ..., "groundedness": ...}}: which judge ran, always shown.
    judges = models.JSONField(default=dict, blank=True)
    # {"ingest_s": float, "cases_s": float, "per_pair_ms": float}
    timings = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    baseline = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["dataset_name", "created_at"], name="evalrun_dataset_time")]

    def __str__(self) -> str:
        return f"eval run {self.pk} on {self.dataset_name} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def percent(self) -> int:
        if not self.pairs_total:
            return 100 if self.is_finished else 0
        return min(100, round(100 * self.pairs_done / self.pairs_total))

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class EvalCaseResult(models.Model):
    """How one profile did on one case: metrics, ranking, answer, failure stage, trace."""

    class Stage(models.TextChoices):
        NOT_IN_POOL = "not_in_pool", "Not in the candidate pool"
        RANKED_OUT = "ranked_out", "In the pool but ranked out"
        DROPPED_BY_BUDGET = "dropped_by_budget", "Dropped by the context budget"
        WRONG_REFUSAL = "wrong_refusal", "Wrong refusal"
        NOT_GROUNDED = "not_grounded", "Answer not grounded"
        ANSWER_INCOMPLETE = "answer_incomplete", "Answer misses expected content"
        ERROR = "error", "The pipeline raised an error"

    run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="results")
    profile = models.CharField(max_length=200)
    case_id = models.CharField(max_length=200)
    question = models.TextField()
    tags = models.JSONField(default=list, blank=True)
    should_refuse = models.BooleanField(default=False)
    # {ref: grade} as the dataset judged it.
    relevant = models.JSONField(default=dict, blank=True)
    expected = models.JSONField(default=list, blank=True)
    # {"recall@5": 1.0, "mrr": 0.5, "refusal_accuracy": 1.0, ...}; None = not applicable.
    metrics = models.JSONField(default=dict, blank=True)
    # The scored ranking: [{"rank", "source", "ref", "relevant", "chunk_id", "score"}].
    retrieved = models.JSONField(default=list, blank=True)
    answer = models.TextField(blank=True)
    mode = models.CharField(max_length=20, blank=True)
    citations = models.JSONField(default=list, blank=True)
    refused = models.BooleanField(default=False)
    groundedness = models.JSONField(null=True, blank=True)
    failure_stage = models.CharField(max_length=20, choices=Stage.choices, blank=True)
    failure_detail = models.TextField(blank=True)
    latency_ms = models.FloatField(default=0.0)
    model_calls = models.PositiveIntegerField(default=0)
    trace = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "profile", "case_id"], name="uniq_eval_case_result"
            )
        ]

    def __str__(self) -> str:
        return f"{self.case_id} / {self.profile} (run {self.run_id})"

    @property
    def passed(self) -> bool:
        return not self.failure_stage

    def metric(self, name: str) -> Any:
        return self.metrics.get(name)
