from django.urls import path

from collections_app import views

app_name = "collections"

urlpatterns = [
    path("", views.home, name="home"),
    path("collections/", views.collection_list, name="list"),
    path("collections/new/", views.collection_create_view, name="create"),
    path("collections/<slug:slug>/", views.collection_detail, name="detail"),
    path("collections/<slug:slug>/edit/", views.collection_edit, name="edit"),
    path("collections/<slug:slug>/delete/", views.collection_delete_view, name="delete"),
    path(
        "collections/<slug:slug>/web-fallback/",
        views.collection_web_fallback,
        name="web_fallback",
    ),
    path("collections/<slug:slug>/members/", views.collection_members, name="members"),
    path("collections/<slug:slug>/upload/", views.collection_upload, name="upload"),
    path("collections/<slug:slug>/urls/", views.collection_add_urls, name="add_urls"),
    path("collections/<slug:slug>/jobs/<int:job_id>/", views.job_detail, name="job"),
    path("collections/<slug:slug>/sources/<int:source_id>/", views.source_detail, name="source"),
    path(
        "collections/<slug:slug>/sources/<int:source_id>/download/",
        views.source_download,
        name="source_download",
    ),
    path(
        "collections/<slug:slug>/sources/<int:source_id>/reingest/",
        views.source_reingest_view,
        name="source_reingest",
    ),
    path(
        "collections/<slug:slug>/sources/<int:source_id>/remove/",
        views.source_remove_view,
        name="source_remove",
    ),
    path("quarantine/", views.quarantine_list, name="quarantine"),
    path("quarantine/decide/", views.quarantine_review_view, name="quarantine_review"),
]
