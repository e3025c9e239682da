from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path

from ragsite.api.tokens import api_token_page


def favicon(request: HttpRequest) -> HttpResponse:
    """/favicon.ico, asked for by browsers on pages that name no icon: the static one."""
    return redirect(static("ragsite/favicon.ico"))


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness + database check for load balancers and docker healthchecks."""
    with connection.cursor() as cur:
        cur.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    # Browsers ask for /favicon.ico on pages that name no icon (the API's JSON, files).
    path("favicon.ico", favicon, name="favicon"),
    path("account/api-token/", api_token_page, name="api_token"),
    path("api/", include("ragsite.api.urls")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Changing the password ends the user's API token (ragsite.passwords).
    path(
        "accounts/password/",
        auth_views.PasswordChangeView.as_view(),
        name="password_change",
    ),
    path(
        "accounts/password/done/",
        auth_views.PasswordChangeDoneView.as_view(),
        name="password_change_done",
    ),
    path("", include("collections_app.urls")),
    path("", include("query_app.urls")),
    path("eval/", include("eval_app.urls")),
]

# Under /api/ these answer JSON; elsewhere the site's pages (templates/4xx.html, 500.html).
handler400 = "ragsite.error_views.bad_request"
handler403 = "ragsite.error_views.permission_denied"
handler404 = "ragsite.error_views.page_not_found"
handler500 = "ragsite.error_views.server_error"
