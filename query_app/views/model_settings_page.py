"""The administrators' page for the chat model and the cross-encoder."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from query_app.forms import (
    ModelSettingsForm,
)
from query_app.model_settings import (
    ModelSettingInvalid,
    chat_connection_test_change,
    is_loopback_url,
    is_model_settings_admin,
    local_chat_servers_detect,
    model_settings_overview,
    model_settings_save,
)
from ragsite.web import is_htmx


def _model_settings_admin(request: HttpRequest) -> None:
    if not is_model_settings_admin(request.user):
        raise PermissionDenied("Only administrators can see or change the model settings.")


def _fill_in(request: HttpRequest) -> dict[str, str]:
    """Values a detected local server's "Use" link fills in (shown, not saved).

    Only a loopback address is taken: a link from elsewhere cannot present a
    remote server as one found on this machine.
    """
    base_url = request.GET.get("use_base_url", "").strip()[:500]
    model = request.GET.get("use_model", "").strip()[:200]
    if not base_url or not is_loopback_url(base_url):
        return {}
    return {"chat_base_url": base_url} | ({"chat_model": model} if model else {})


@require_http_methods(["GET", "POST"])
@login_required
def model_settings(request: HttpRequest) -> HttpResponse:
    """Chat server, API key and cross-encoder; test the connection; find local servers."""
    _model_settings_admin(request)
    if request.method == "GET" and request.GET.get("detect") and is_htmx(request):
        servers = local_chat_servers_detect()
        return render(
            request, "query/model_settings.html#detected", {"servers": servers, "detected": True}
        )
    overview = model_settings_overview(user=request.user)
    context: dict[str, Any] = {"overview": overview, "test": None}
    if request.method == "GET":
        fill = _fill_in(request)
        context["form"] = ModelSettingsForm(overview=overview, fill=fill)
        context["filled"] = fill
        if request.GET.get("detect"):
            context |= {"servers": local_chat_servers_detect(), "detected": True}
        return render(request, "query/model_settings.html", context)
    form = ModelSettingsForm(request.POST, overview=overview)
    context["form"] = form
    testing = request.POST.get("action") == "test"
    if not form.is_valid():
        if testing and is_htmx(request):
            errors = "; ".join(str(e) for errors in form.errors.values() for e in errors)
            context["test"] = {"ok": False, "message": errors}
            return render(request, "query/model_settings.html#test_result", context)
        return render(request, "query/model_settings.html", context, status=400)
    if testing:
        context["test"] = chat_connection_test_change(user=request.user, change=form.change())
        if is_htmx(request):
            return render(request, "query/model_settings.html#test_result", context)
        return render(request, "query/model_settings.html", context)
    try:
        model_settings_save(user=request.user, change=form.change())
    except ModelSettingInvalid as exc:
        form.add_error(exc.field if exc.field in form.fields else None, str(exc))
        return render(request, "query/model_settings.html", context, status=400)
    messages.success(request, "Model settings saved. The next answer uses them.")
    return redirect("query:model_settings")
