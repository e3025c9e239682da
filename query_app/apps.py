from django.apps import AppConfig


class QueryAppConfig(AppConfig):
    name = "query_app"
    verbose_name = "Answering"

    def ready(self) -> None:
        # Connects the receiver that drops cached profiles when settings change.
        from query_app.pipeline import profiles  # noqa: F401
