"""Forms of the ask and history pages."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib.auth.models import AnonymousUser, User

from collections_app.selectors import collections_for_user
from query_app.pipeline.profiles import default_profile_name, profile_names


def profile_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in profile_names()]


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

    def __init__(self, *args: Any, user: User | AnonymousUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.collections = list(
            collections_for_user(user, include_evaluation=False).only("slug", "name")
        )
        self.fields["collection"].widget.choices = [(c.slug, c.name) for c in self.collections]
        self.fields["profile"].widget.choices = profile_choices()
        self.fields["profile"].initial = default_profile_name()


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
