"""The saved settings as each process sees them, what applies field by field, and saving."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as AuthUser
from django.db import transaction
from django.db.models import F

from query_app.model_settings.crypto import api_key_decrypt, api_key_encrypt
from query_app.model_settings.errors import (
    Field,
    ModelSettingInvalid,
    ModelSettingsError,
    NotAnAdministrator,
)
from query_app.model_settings.local_servers import is_loopback_url
from query_app.model_settings.validation import chat_base_url_validate, rerank_model_validate
from query_app.models import ModelSettings
from query_app.pipeline.options import QueryOptions

logger = logging.getLogger(__name__)

# How old a process's copy of the saved settings may be before it reads them again.
REFRESH_S = 1.0

FIELDS: tuple[Field, ...] = ("chat_base_url", "chat_model", "chat_api_key", "rerank_model")
ENV_VARS: dict[Field, str] = {
    "chat_base_url": "RAG_CHAT_BASE_URL",
    "chat_model": "RAG_CHAT_MODEL",
    "chat_api_key": "RAG_CHAT_API_KEY",
    "rerank_model": "RAG_RERANK_MODEL",
}
Source = Literal["environment", "saved", "unset"]

User = AuthUser | AnonymousUser


@dataclass(frozen=True)
class SavedModelSettings:
    """The saved row as read by this process (empty values when nothing was saved)."""

    version: int = 0
    chat_base_url: str = ""
    chat_model: str = ""
    chat_api_key_encrypted: str = ""
    rerank_model: str = ""
    updated_at: datetime | None = None
    updated_by: str = ""

    @property
    def chat_api_key_set(self) -> bool:
        return bool(self.chat_api_key_encrypted)


_lock = threading.Lock()
_loaded: tuple[float, SavedModelSettings] | None = None


def model_settings_saved() -> SavedModelSettings:
    """The saved settings, read again when this process's copy is older than REFRESH_S."""
    global _loaded
    now = time.monotonic()
    with _lock:
        cached = _loaded
    if cached is not None and now - cached[0] < REFRESH_S:
        return cached[1]
    row = (
        ModelSettings.objects.filter(pk=ModelSettings.SINGLETON_ID)
        .select_related("updated_by")
        .first()
    )
    saved = (
        SavedModelSettings(
            version=row.version,
            chat_base_url=row.chat_base_url,
            chat_model=row.chat_model,
            chat_api_key_encrypted=row.chat_api_key_encrypted,
            rerank_model=row.rerank_model,
            updated_at=row.updated_at,
            updated_by=row.updated_by.get_username() if row.updated_by else "",
        )
        if row is not None
        else SavedModelSettings()
    )
    with _lock:
        _loaded = (now, saved)
    return saved


def model_settings_forget() -> None:
    """Drop this process's copy: the next read goes to the database."""
    global _loaded
    with _lock:
        _loaded = None


@dataclass(frozen=True)
class ResolvedSetting:
    """One setting as it applies here, and where its value comes from."""

    field: Field
    value: str  # for the API key: the key itself; never render it
    source: Source
    # Why a saved value cannot be used ("" when it can).
    problem: str = ""

    @property
    def env_var(self) -> str:
        return ENV_VARS[self.field]

    @property
    def from_environment(self) -> bool:
        return self.source == "environment"


def environment_value(field: Field) -> str:
    """The value deployment configuration gives ``field`` (settings.RAG, from the env var)."""
    rag: Mapping[str, Any] = settings.RAG
    if field == "rerank_model":
        rerank = (rag.get("query") or {}).get("rerank") or {}
        return str(rerank.get("model") or "").strip()
    chat = rag.get("chat") or {}
    return str(chat.get(field.removeprefix("chat_")) or "").strip()


def model_setting_resolve(
    field: Field, *, saved: SavedModelSettings | None = None
) -> ResolvedSetting:
    """What applies for ``field``: the environment, else the saved value, else nothing.

    The saved row is read only when the environment leaves the field unset.
    """
    env = environment_value(field)
    if env:
        return ResolvedSetting(field, env, "environment")
    saved = saved if saved is not None else model_settings_saved()
    if field == "chat_api_key":
        if not saved.chat_api_key_encrypted:
            return ResolvedSetting(field, "", "unset")
        try:
            return ResolvedSetting(field, api_key_decrypt(saved.chat_api_key_encrypted), "saved")
        except ModelSettingsError as exc:
            return ResolvedSetting(field, "", "saved", problem=str(exc))
    value = str(getattr(saved, field)).strip()
    return ResolvedSetting(field, value, "saved" if value else "unset")


def chat_endpoint_resolve() -> tuple[str, str, str]:
    """(base URL, model, API key) of the chat server that applies; "" where unset.

    No chat server without both a base URL and a model: the key is then not read.
    """
    base_url = model_setting_resolve("chat_base_url").value
    model = model_setting_resolve("chat_model").value
    if not base_url or not model:
        return base_url, model, ""
    key = model_setting_resolve("chat_api_key")
    if key.problem:
        logger.error("chat model: %s", key.problem)
    return base_url, model, key.value


def rerank_model_resolve() -> str:
    """The cross-encoder that applies: RAG_RERANK_MODEL, else the saved one, else ""."""
    return model_setting_resolve("rerank_model").value


def options_with_saved_models(options: QueryOptions) -> QueryOptions:
    """``options`` with the saved cross-encoder where nothing else named one.

    Profiles and request overrides resolve without the database (and are cached
    per process); the saved model joins here, so a change applies to the next
    answer. An explicit model (environment, per-profile settings, a request) wins.
    """
    if options.rerank.model:
        return options
    model = rerank_model_resolve()
    if not model:
        return options
    return dataclasses.replace(options, rerank=dataclasses.replace(options.rerank, model=model))


def is_model_settings_admin(user: User) -> bool:
    """Model settings (where answers are sent, which model files load) are for superusers."""
    return bool(getattr(user, "is_active", False) and getattr(user, "is_superuser", False))


@dataclass(frozen=True)
class ModelSettingsChange:
    """What an administrator submitted; None leaves a field as it is."""

    chat_base_url: str | None = None
    chat_model: str | None = None
    # A new key to store; None keeps the stored one.
    chat_api_key: str | None = None
    clear_chat_api_key: bool = False
    rerank_model: str | None = None


def model_settings_save(*, user: User, change: ModelSettingsChange) -> SavedModelSettings:
    """Validate and store ``change``; the next answer in every process uses it.

    Raises NotAnAdministrator, or ModelSettingInvalid naming the field at fault.
    """
    if not is_model_settings_admin(user):
        raise NotAnAdministrator("only administrators can change the model settings")
    if change.chat_api_key and change.clear_chat_api_key:
        raise ModelSettingInvalid(
            "Either enter a new API key or clear the saved one, not both.", field="chat_api_key"
        )
    with transaction.atomic():
        row, _ = ModelSettings.objects.select_for_update().get_or_create(
            pk=ModelSettings.SINGLETON_ID
        )
        if change.chat_base_url is not None:
            row.chat_base_url = chat_base_url_validate(change.chat_base_url)
        if change.chat_model is not None:
            row.chat_model = change.chat_model.strip()
        if change.rerank_model is not None:
            row.rerank_model = rerank_model_validate(change.rerank_model)
        if change.clear_chat_api_key:
            row.chat_api_key_encrypted = ""
        elif change.chat_api_key:
            row.chat_api_key_encrypted = api_key_encrypt(change.chat_api_key.strip())
        _check_complete(row)
        row.version = F("version") + 1
        row.updated_by = user if isinstance(user, AuthUser) else None
        row.save()
    model_settings_forget()
    saved = model_settings_saved()
    changed = [
        name
        for name, value in dataclasses.asdict(change).items()
        if value is not None and value is not False
    ]
    # Never the key itself: only that it changed.
    logger.info(
        "model settings v%s saved by %s (%s)",
        saved.version,
        user.get_username(),
        ", ".join(changed),
    )
    return saved


def _check_complete(row: ModelSettings) -> None:
    """A chat server needs both an address and a model, wherever each one comes from."""
    base_url = environment_value("chat_base_url") or row.chat_base_url
    model = environment_value("chat_model") or row.chat_model
    if base_url and not model:
        raise ModelSettingInvalid(
            "Enter the model to use on this server (for example llama3.2 or gpt-4o-mini).",
            field="chat_model",
        )
    if model and not base_url:
        raise ModelSettingInvalid(
            "Enter the server's base URL for this model, or clear the model to answer "
            "extractively.",
            field="chat_base_url",
        )


@dataclass(frozen=True)
class ModelSettingsOverview:
    """What the settings page shows: the saved row and what applies, field by field."""

    saved: SavedModelSettings
    resolved: dict[Field, ResolvedSetting]

    @property
    def chat_active(self) -> bool:
        return bool(self.resolved["chat_base_url"].value and self.resolved["chat_model"].value)

    @property
    def key_sent_in_clear(self) -> bool:
        """An API key goes over plain http to another machine."""
        url = self.resolved["chat_base_url"].value
        return (
            self.chat_active
            and bool(self.resolved["chat_api_key"].value)
            and urlsplit(url).scheme == "http"
            and not is_loopback_url(url)
        )


def model_settings_overview(*, user: User) -> ModelSettingsOverview:
    """The saved settings and what applies now, read fresh from the database."""
    if not is_model_settings_admin(user):
        raise NotAnAdministrator("only administrators can see the model settings")
    model_settings_forget()
    saved = model_settings_saved()
    return ModelSettingsOverview(
        saved=saved, resolved={f: model_setting_resolve(f, saved=saved) for f in FIELDS}
    )
