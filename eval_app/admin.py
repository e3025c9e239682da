from django.contrib import admin

from eval_app import models


@admin.register(models.EvalRun)
class EvalRunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "dataset_name",
        "status",
        "offline",
        "pairs_done",
        "pairs_total",
        "code_version",
        "created_by",
        "created_at",
    )
    list_filter = ("status", "dataset_name", "offline")
    search_fields = ("dataset_name", "code_version")
    raw_id_fields = ("baseline", "collection", "created_by")
    readonly_fields = ("created_at", "started_at", "finished_at")


@admin.register(models.EvalCaseResult)
class EvalCaseResultAdmin(admin.ModelAdmin):
    list_display = ("case_id", "profile", "run", "failure_stage", "refused", "latency_ms")
    list_filter = ("profile", "failure_stage", "refused")
    search_fields = ("case_id", "question")
    raw_id_fields = ("run",)
