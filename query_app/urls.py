from django.urls import path

from query_app import views

app_name = "query"

urlpatterns = [
    path("ask/", views.ask, name="ask"),
    path("ask/stream/", views.ask_stream, name="ask_stream"),
    path("history/", views.history, name="history"),
    path("history/<int:run_id>/", views.history_detail, name="history_detail"),
    path("history/<int:run_id>/rerun/", views.rerun, name="rerun"),
    path("history/<int:run_id>/passages/<int:marker>/", views.passage, name="passage"),
    path("conversations/<int:conversation_id>/", views.conversation, name="conversation"),
    path(
        "conversations/<int:conversation_id>/ask/",
        views.conversation_ask,
        name="conversation_ask",
    ),
    path("settings/models/", views.model_settings, name="model_settings"),
]
