from django.urls import path

from eval_app import views

app_name = "eval"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("runs/", views.run_list, name="runs"),
    path("runs/start/", views.run_start, name="start"),
    path("runs/<int:run_id>/", views.run_detail, name="run"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="cancel"),
    path("runs/<int:run_id>/cases.csv", views.run_cases_csv, name="cases_csv"),
    path("runs/<int:run_id>/cases/<str:case_id>/", views.case_detail, name="case"),
    path("compare/", views.runs_compare_view, name="compare"),
    path("plotly.min.js", views.plotly_js, name="plotly_js"),
]
