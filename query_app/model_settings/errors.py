"""The names of the model settings, and their errors (messages fit to show an administrator)."""

from __future__ import annotations

from typing import Literal

# The settings an administrator may set on the page.
Field = Literal["chat_base_url", "chat_model", "chat_api_key", "rerank_model"]


class ModelSettingsError(Exception):
    """Base class: a model setting could not be saved or used; the message says why."""


class ModelSettingInvalid(ModelSettingsError):
    """A value entered for a model setting is not acceptable."""

    def __init__(self, message: str, *, field: Field | None = None) -> None:
        super().__init__(message)
        self.field = field


class NotAnAdministrator(ModelSettingsError):
    """Only superusers may read or change the model settings."""
