from django.contrib import admin

from collections_app import models


@admin.register(models.Collection)
class CollectionAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "embedding_model", "embedding_dimensions", "index_version")
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}


@admin.register(models.CollectionMembership)
class CollectionMembershipAdmin(admin.ModelAdmin):
    list_display = ("collection", "user", "role")
    list_filter = ("role",)


@admin.register(models.Source)
class SourceAdmin(admin.ModelAdmin):
    list_display = ("location", "collection", "kind", "status", "chunk_count", "ingested_at")
    list_filter = ("status", "kind", "collection")
    search_fields = ("location", "title")
    exclude = ("text",)


@admin.register(models.Chunk)
class ChunkAdmin(admin.ModelAdmin):
    list_display = ("id", "source", "ordinal", "page", "token_count")
    list_filter = ("collection",)
    search_fields = ("id", "text")
    exclude = ("embedding",)
    raw_id_fields = ("source",)


@admin.register(models.ManifestEntry)
class ManifestEntryAdmin(admin.ModelAdmin):
    list_display = ("location", "collection", "content_hash", "updated_at")
    list_filter = ("collection",)
    search_fields = ("location",)


@admin.register(models.IngestionJob)
class IngestionJobAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "collection",
        "status",
        "sources_done",
        "sources_total",
        "attempts",
        "heartbeat_at",
        "created_at",
    )
    list_filter = ("status", "collection")


@admin.register(models.Provenance)
class ProvenanceAdmin(admin.ModelAdmin):
    list_display = ("location", "origin", "content_hash", "submitted_by", "retrieved_at")
    list_filter = ("origin",)


@admin.register(models.QuarantineItem)
class QuarantineItemAdmin(admin.ModelAdmin):
    list_display = ("source", "verdict", "review_status", "reviewer", "created_at")
    list_filter = ("verdict", "review_status", "collection")


@admin.register(models.TermStat)
class TermStatAdmin(admin.ModelAdmin):
    list_display = ("collection", "lexeme", "ndoc")
    list_filter = ("collection",)
    search_fields = ("lexeme",)
