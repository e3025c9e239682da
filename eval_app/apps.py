from django.apps import AppConfig


class EvalAppConfig(AppConfig):
    name = "eval_app"
    verbose_name = "Evaluation"
