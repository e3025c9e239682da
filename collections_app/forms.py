"""Forms of the browser pages: collections, members, uploads, URLs, quarantine review."""

from __future__ import annotations

import secrets
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from collections_app.models import CollectionMembership
from collections_app.services.collection import SLUG_UNAVAILABLE, member_unavailable

MAX_URLS_PER_SUBMIT = 50
MAX_FILES_PER_UPLOAD = 100


def new_request_key() -> str:
    """A one-time token for a form: a resubmitted form reuses it, so no job is duplicated."""
    return secrets.token_urlsafe(24)


def chunking_choices() -> list[tuple[str, str]]:
    """The registered chunking strategies, for a select box."""
    from collections_app.ingestion.chunking import CHUNKERS

    return [(name, name) for name in sorted(CHUNKERS)]


class CollectionForm(forms.Form):
    name = forms.CharField(max_length=200)
    slug = forms.SlugField(
        max_length=100,
        required=False,
        help_text="Used in addresses; derived from the name when left empty.",
        error_messages={"invalid": SLUG_UNAVAILABLE},
    )
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    chunking_strategy = forms.ChoiceField(
        choices=(), help_text="How new documents are cut into passages."
    )
    summary_tree = forms.BooleanField(
        required=False,
        label="Summary tree",
        help_text=(
            "Also index summaries of each section and document, so broad questions find "
            "their passages (built after each ingestion; answers still cite the passages)."
        ),
    )

    def __init__(self, *args: Any, editing: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["chunking_strategy"].choices = chunking_choices()
        self.fields["chunking_strategy"].initial = settings.RAG["ingestion"]["default_chunking"]
        if editing:
            # The slug is part of every address of the collection; it stays put.
            del self.fields["slug"]


class WebFallbackForm(forms.Form):
    web_fallback = forms.BooleanField(
        required=False,
        label="Allow the web fallback",
        help_text=(
            "When a corrective or adaptive answer finds no good evidence here, a question "
            "whose asker ticks “search the web” is sent to this server's web search; the "
            "pages found are cited by their address and never added to the collection."
        ),
    )


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """A file field that accepts several files (``<input type=file multiple>``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> list[Any]:
        # Per-file checks (empty, too large, not a document) happen in the upload
        # service so one bad file is refused with its reason and the rest go ahead.
        files = list(data) if isinstance(data, list | tuple) else [data] if data else []
        files = [f for f in files if f]
        if self.required and not files:
            raise ValidationError(self.error_messages["required"], code="required")
        return files


class UploadForm(forms.Form):
    files = MultipleFileField(required=True)
    chunking = forms.ChoiceField(choices=(), required=False)
    request_key = forms.CharField(widget=forms.HiddenInput, max_length=64)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["chunking"].choices = [("", "collection default"), *chunking_choices()]

    def clean_files(self) -> list[Any]:
        files = self.cleaned_data["files"]
        if not files:
            raise ValidationError("Choose at least one file.")
        if len(files) > MAX_FILES_PER_UPLOAD:
            raise ValidationError(f"At most {MAX_FILES_PER_UPLOAD} files per upload.")
        return files


class UrlForm(forms.Form):
    urls = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "https://example.com/page"}),
        help_text="One http or https address per line.",
    )
    chunking = forms.ChoiceField(choices=(), required=False)
    request_key = forms.CharField(widget=forms.HiddenInput, max_length=64)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["chunking"].choices = [("", "collection default"), *chunking_choices()]

    def clean_urls(self) -> list[str]:
        # Each address is checked on its own by the service (urls_accept): the good
        # ones go ahead and every bad one is reported with its reason.
        lines = [line.strip() for line in self.cleaned_data["urls"].splitlines() if line.strip()]
        if not lines:
            raise ValidationError("Enter at least one address.")
        if len(lines) > MAX_URLS_PER_SUBMIT:
            raise ValidationError(f"At most {MAX_URLS_PER_SUBMIT} addresses at a time.")
        return list(dict.fromkeys(lines))


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(
        choices=[*CollectionMembership.Role.choices, ("", "No access")], required=False
    )

    def clean_username(self) -> Any:
        username = self.cleaned_data["username"].strip()
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            # The same words for a username nobody has and an inactive account.
            raise ValidationError(member_unavailable(username))
        return user


class QuarantineDecisionForm(forms.Form):
    DECISIONS = (("approve", "Approve"), ("reject", "Reject"))

    items = forms.TypedMultipleChoiceField(coerce=int, choices=())
    decision = forms.ChoiceField(choices=DECISIONS)
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)

    def __init__(self, *args: Any, item_ids: list[int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["items"].choices = [(pk, str(pk)) for pk in item_ids]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("decision") == "reject" and not (data.get("reason") or "").strip():
            self.add_error("reason", "A rejection needs a reason.")
        return data
