from django.apps import AppConfig


class QueryAppConfig(AppConfig):
    name = "query_app"
    verbose_name = "Answering"
