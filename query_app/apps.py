from django.apps import AppConfig


class QueryAppConfig(AppConfig):
    name = "query_app"
    verbose_name = "Answering"

    def ready(self) -> None:
        # Lends the chat model to collections_app's summary tree, and connects the
        # receiver that drops cached profiles when settings change.
        from query_app import summaries  # noqa: F401
        from query_app.pipeline import profiles  # noqa: F401
