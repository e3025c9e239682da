"""Collections and who may use them: a collection's settings and its members' roles."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Collection(models.Model):
    """A named set of documents sharing one embedding profile and chunking defaults."""

    class Purpose(models.TextChoices):
        WORKSPACE = "workspace", "Workspace"
        # Built by the evaluation harness from a golden dataset's corpus: kept out
        # of the pickers, lists and quarantine queue people work with.
        EVALUATION = "evaluation", "Evaluation"

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    purpose = models.CharField(
        max_length=20, choices=Purpose.choices, default=Purpose.WORKSPACE, db_index=True
    )
    # The embedding profile recorded on first ingestion; a different active
    # profile fails ingestion loudly unless the run is a reindex.
    embedding_provider = models.CharField(max_length=100, blank=True)
    embedding_model = models.CharField(max_length=500, blank=True)
    embedding_dimensions = models.PositiveIntegerField(null=True, blank=True)
    # Optional per-collection overrides of settings.RAG["embedding"] (e.g. another
    # model); the active profile is that configuration's model.
    embedding_config = models.JSONField(default=dict, blank=True)
    chunking_strategy = models.CharField(max_length=50, default="recursive")
    chunking_options = models.JSONField(default=dict, blank=True)
    # Bumped by every ingestion that changes chunks; caches key on it.
    index_version = models.PositiveIntegerField(default=0)
    # {"chunks": int, "avg_lexemes": float} for BM25 length normalisation;
    # refreshed with TermStat.
    keyword_stats = models.JSONField(default=dict, blank=True)
    # Build a summary tree (section and document summaries stored as retrievable
    # summary chunks, collections_app/ingestion/summary_tree/) after each ingestion.
    summary_tree = models.BooleanField(default=False)
    # Corrective and adaptive answers may search the web once the collection's own
    # evidence stays insufficient, for requests that ask (query_app/pipeline/web/).
    # Nothing found there is ever stored here.
    web_fallback = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_evaluation(self) -> bool:
        return self.purpose == self.Purpose.EVALUATION

    @property
    def embedding_profile(self) -> dict[str, object] | None:
        if not self.embedding_model:
            return None
        return {
            "provider": self.embedding_provider,
            "model": self.embedding_model,
            "dimensions": self.embedding_dimensions,
        }


class CollectionMembership(models.Model):
    """Per-collection permission of one user: read < write < admin."""

    class Role(models.TextChoices):
        READ = "read", "Read"
        WRITE = "write", "Write"
        ADMIN = "admin", "Admin"

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="collection_memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.READ)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["collection", "user"], name="uniq_membership")
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.role} {self.collection}"
