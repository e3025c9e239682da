"""Forms of the ask and history pages."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from django import forms
from django.contrib.auth.models import AnonymousUser, User
from django.core.signals import setting_changed
from django.dispatch import receiver

from collections_app.selectors import collections_for_user
from query_app.chat import ChatConfig
from query_app.exceptions import QueryError
from query_app.model_settings import (
    ModelSettingInvalid,
    ModelSettingsChange,
    ModelSettingsOverview,
    SavedModelSettings,
    chat_base_url_validate,
    model_settings_saved,
    rerank_model_validate,
)
from query_app.pipeline.profiles import default_profile_name, profile_stages
from query_app.services import MissingPart, profile_names, profile_needs, profile_resolve
from ragsite.web import BadInput

RETRIEVAL_WORDS = {
    "vector": "vector search",
    "keyword": "keyword search",
    "hybrid": "hybrid search",
}


@dataclass
class ProfileHere:
    """A profile as it runs on this deployment: what runs, what is skipped, or why it cannot."""

    name: str
    # The stages it goes through, in order (the ask page lists them as they finish).
    stages: tuple[str, ...] = ()
    runs: list[str] = field(default_factory=list)
    skipped: list[MissingPart] = field(default_factory=list)
    problem: str = ""

    @property
    def label(self) -> str:
        """E.g. "balanced — hybrid search; cross-encoder reranker not configured, skipped"."""
        if self.problem:
            return f"{self.name} — not available here: {self.problem}"
        parts = [", ".join(self.runs)] + [p.short for p in self.skipped]
        return f"{self.name} — {'; '.join(p for p in parts if p)}"


def profile_here(name: str, *, chat_configured: bool) -> ProfileHere:
    """What profile ``name`` runs here, asked of its stages (the same checks an answer makes)."""
    here = ProfileHere(name=name, stages=profile_stages(name))
    try:
        name, options = profile_resolve(profile=name)
        needs = profile_needs(profile=name, options=options, chat_configured=chat_configured)
    except QueryError as exc:  # e.g. a settings override the deployment got wrong
        here.problem = str(exc)
        return here
    if needs.problem is not None:
        # rerank.required and the like: asking would fail with this message.
        here.problem = str(needs.problem)
        return here
    o = options
    if o.transform.kind != "none":
        here.runs.append(f"{o.transform.kind} query rewriting")
    here.runs.append(RETRIEVAL_WORDS.get(o.retrieval.mode, f"{o.retrieval.mode} search"))
    if o.rerank.kind != "none" and all(p.stage != "rerank" for p in needs.runs_without):
        here.runs.append(f"{o.rerank.kind} reranking")
    if o.groundedness.enabled:
        here.runs.append("groundedness check")
    here.skipped = list(needs.runs_without)
    return here


# What profiles_here found, with the saved model settings it read: every answer
# partial (its rerun picker) and ask page shows the picker, and asking each stage
# of five profiles costs about 1.5 ms a time. The saved settings are reread every
# few seconds (store.REFRESH_S) and at once after a save, and each new read is a
# new object, so a change of them, or of settings.RAG, shows at the next render.
_profiles_lock = threading.Lock()
_profiles_cached: tuple[SavedModelSettings, list[ProfileHere]] | None = None


def profiles_here() -> list[ProfileHere]:
    """Every profile a request may name, as it runs on this deployment."""
    global _profiles_cached
    saved = model_settings_saved()
    with _profiles_lock:
        cached = _profiles_cached
    if cached is not None and cached[0] is saved:
        return list(cached[1])
    chat_configured = ChatConfig.from_settings() is not None
    found = [profile_here(name, chat_configured=chat_configured) for name in profile_names()]
    with _profiles_lock:
        _profiles_cached = (saved, found)
    return list(found)


@receiver(setting_changed)
def _drop_cached_profiles_here(*, setting: str, **_: Any) -> None:
    global _profiles_cached
    if setting == "RAG":
        with _profiles_lock:
            _profiles_cached = None


def profile_choices(profiles: list[ProfileHere] | None = None) -> list[tuple[str, str]]:
    return [(p.name, p.label) for p in (profiles if profiles is not None else profiles_here())]


class AskForm(forms.Form):
    # Plain strings behind select boxes: an unreadable collection or an unknown
    # profile is reported by the answering service (404 / the list of known ones).
    collection = forms.CharField(required=False, widget=forms.Select)
    profile = forms.CharField(required=False, widget=forms.Select)
    # Emptiness and length are checked by the answering service, whose messages
    # are the ones every surface shows.
    question = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(
            attrs={"rows": 3, "placeholder": "Ask a question about this collection…"}
        ),
    )
    retrieval_only = forms.BooleanField(
        required=False, label="Retrieve only (show the passages, no generated answer)"
    )
    # Shown only for a collection that allows it and a profile that searches the web.
    web_fallback = forms.BooleanField(
        required=False, label="Search the web when this collection has no good answer"
    )

    def __init__(self, *args: Any, user: User | AnonymousUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.collections = list(
            collections_for_user(user, include_evaluation=False).only(
                "slug", "name", "web_fallback"
            )
        )
        self.fields["collection"].widget.choices = [(c.slug, c.name) for c in self.collections]
        self.profiles = profiles_here()
        self.fields["profile"].widget.choices = profile_choices(self.profiles)
        self.fields["profile"].initial = default_profile_name()
        if self.profile_notes:
            # A screen reader reads what the profiles skip here with the picker.
            self.fields["profile"].widget.attrs["aria-describedby"] = "profile-notes"

    @property
    def profile_stages(self) -> dict[str, list[str]]:
        """Each profile's stages, for the progress list the page shows while answering."""
        return {p.name: list(p.stages) for p in self.profiles}

    @property
    def web_fallback_choices(self) -> dict[str, list[str]] | None:
        """The collections allowing the web fallback and the profiles running it (None: never)."""
        from query_app.pipeline.web import WebSearchConfig

        collections = [c.slug for c in self.collections if c.web_fallback]
        if not collections or not WebSearchConfig.from_settings().configured:
            return None
        profiles = [p.name for p in self.profiles if "web" in p.stages]
        return {"collections": collections, "profiles": profiles}

    @property
    def web_fallback_shown(self) -> bool:
        """Whether the box applies to the collection and profile selected as the page loads."""
        choices = self.web_fallback_choices
        if choices is None:
            return False
        slugs = [c.slug for c in self.collections]
        collection = self["collection"].value() or (slugs[0] if slugs else "")
        profile = self["profile"].value() or default_profile_name()
        return collection in choices["collections"] and profile in choices["profiles"]

    @property
    def profile_notes(self) -> list[str]:
        """One line per missing part: the profiles that skip it and how to enable it."""
        skipping: dict[MissingPart, list[str]] = {}
        for profile in self.profiles:
            for part in profile.skipped:
                skipping.setdefault(part, []).append(profile.name)
        notes = []
        for part, names in skipping.items():
            note = f"{', '.join(names)}: {part.short}."
            if part.enable:
                note += f" To enable it, {part.enable}."
            notes.append(note)
        return notes


class AskInput(forms.Form):
    """The text fields of a posted ask form, read before the answering service sees them.

    Django's text fields refuse NUL characters, which PostgreSQL cannot store or
    compare: such a question or collection is a 400 with a sentence saying why
    (``ask_input_check``), as the API answers it. Everything else (empty, too long,
    unknown collection or profile) is the answering service's to judge.
    """

    collection = forms.CharField(required=False, strip=False)
    question = forms.CharField(required=False, strip=False)
    profile = forms.CharField(required=False, strip=False)
    conversation = forms.CharField(required=False, strip=False)


def ask_input_check(data: Mapping[str, Any]) -> None:
    """Raise BadInput (a 400 page with the reason) when ``data`` holds what no question can."""
    posted = AskInput({name: data.get(name, "") for name in AskInput.base_fields})
    if not posted.is_valid():
        problems = [
            f"the {name} field: {str(message).rstrip('.').lower()}"
            for name, messages in posted.errors.items()
            for message in messages
        ]
        raise BadInput("The question was not asked: " + "; ".join(problems) + ".")


class RerunForm(forms.Form):
    profile = forms.ChoiceField(choices=())

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["profile"]).choices = profile_choices()


class HistoryFilterForm(forms.Form):
    q = forms.CharField(required=False, label="Search", max_length=200)
    collection = forms.ChoiceField(required=False, choices=())

    def __init__(self, *args: Any, user: User | AnonymousUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.collections = list(
            collections_for_user(user, include_evaluation=False).only("slug", "name")
        )
        cast(forms.ChoiceField, self.fields["collection"]).choices = [("", "All collections")] + [
            (c.slug, c.name) for c in self.collections
        ]


class ModelSettingsForm(forms.Form):
    """The model settings page: chat server, API key (write-only) and cross-encoder.

    A field whose environment variable is set is shown disabled with the value
    that applies (never the key's); submitting leaves its saved value as it is.
    """

    chat_base_url = forms.CharField(
        required=False,
        max_length=500,
        label="Base URL",
        help_text=(
            "The server's OpenAI-compatible API root: http://127.0.0.1:11434/v1 for Ollama, "
            "http://127.0.0.1:8080/v1 for a llama.cpp server, https://api.openai.com/v1 for "
            "OpenAI. Leave empty to answer extractively (quotes from the documents)."
        ),
        widget=forms.TextInput(
            attrs={
                "placeholder": "http://127.0.0.1:11434/v1",
                "autocomplete": "off",
                "spellcheck": "false",
            }
        ),
    )
    chat_model = forms.CharField(
        required=False,
        max_length=200,
        label="Model",
        help_text="The model name as the server knows it, e.g. llama3.2 or gpt-4o-mini.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    chat_api_key = forms.CharField(
        required=False,
        max_length=2000,
        label="API key",
        # Never rendered back, not even after an error.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    clear_chat_api_key = forms.BooleanField(required=False, label="Remove the saved API key")
    rerank_model = forms.CharField(
        required=False,
        max_length=1000,
        label="Cross-encoder model",
        help_text=(
            "For the balanced and quality profiles: the absolute path of a directory holding a "
            "sentence-transformers CrossEncoder (config.json) or a model.onnx with its tokenizer, "
            "or a model id already in this machine's Hugging Face cache. Nothing is downloaded."
        ),
        widget=forms.TextInput(
            attrs={
                "placeholder": "/srv/models/ms-marco-MiniLM-L-6-v2",
                "autocomplete": "off",
                "spellcheck": "false",
            }
        ),
    )

    def __init__(
        self,
        *args: Any,
        overview: ModelSettingsOverview,
        fill: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        saved = overview.saved
        initial = {
            "chat_base_url": saved.chat_base_url,
            "chat_model": saved.chat_model,
            "rerank_model": saved.rerank_model,
            **(fill or {}),
        }
        kwargs["initial"] = initial
        super().__init__(*args, **kwargs)
        self.overview = overview
        key = self.fields["chat_api_key"]
        if saved.chat_api_key_set:
            key.help_text = (
                "A key is saved. Leave this empty to keep it; type a new one to replace it."
            )
            key.widget.attrs["placeholder"] = "•••••••• (a key is saved)"
        else:
            key.help_text = "Only if the server asks for one (OpenAI does; Ollama does not)."
            del self.fields["clear_chat_api_key"]
        for name, resolved in overview.resolved.items():
            if resolved.from_environment and name in self.fields:
                self.fields[name].disabled = True
                if name != "chat_api_key":
                    self.initial[name] = resolved.value
        if overview.resolved["chat_api_key"].from_environment:
            self.fields.pop("clear_chat_api_key", None)

    def clean_chat_base_url(self) -> str:
        return self._validated("chat_base_url", chat_base_url_validate)

    def clean_rerank_model(self) -> str:
        return self._validated("rerank_model", rerank_model_validate)

    def _validated(self, name: str, validate: Callable[[str], str]) -> str:
        value = str(self.cleaned_data.get(name) or "")
        if self.fields[name].disabled:
            return value
        try:
            return validate(value)
        except ModelSettingInvalid as exc:
            raise forms.ValidationError(str(exc)) from None

    def change(self) -> ModelSettingsChange:
        """What to save: None for fields the environment sets (their saved value stays)."""
        data = self.cleaned_data

        def entered(name: str) -> str | None:
            field = self.fields.get(name)
            return None if field is None or field.disabled else str(data.get(name) or "")

        return ModelSettingsChange(
            chat_base_url=entered("chat_base_url"),
            chat_model=entered("chat_model"),
            chat_api_key=entered("chat_api_key") or None,
            clear_chat_api_key=bool(data.get("clear_chat_api_key")),
            rerank_model=entered("rerank_model"),
        )
