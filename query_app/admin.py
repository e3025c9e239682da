from django.contrib import admin

from query_app.models import QueryRun


@admin.register(QueryRun)
class QueryRunAdmin(admin.ModelAdmin):
    list_display = ("question", "collection", "profile", "mode", "user", "total_ms", "created_at")
    list_filter = ("mode", "profile", "retrieval_only", "collection")
    search_fields = ("question", "answer")
    raw_id_fields = ("user",)
    date_hierarchy = "created_at"
    # Runs are records of what happened: nothing to edit.
    readonly_fields = [f.name for f in QueryRun._meta.fields]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False
