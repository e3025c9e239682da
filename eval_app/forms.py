"""Forms of the evaluation pages: start a run, filter a run's cases."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from django import forms
from django.conf import settings

from eval_app.harness.datasets import known_datasets
from eval_app.models import EvalCaseResult
from eval_app.selectors import DEFAULT_CASE_SORT, OUTCOME_FAILED, OUTCOME_PASSED, CaseFilter
from query_app.services import profile_names


def _relative(path: Path) -> str:
    try:
        return path.relative_to(Path(settings.BASE_DIR)).as_posix()
    except ValueError:
        return path.as_posix()


def dataset_choices() -> list[tuple[str, str]]:
    """Known datasets under eval/, as (path relative to the project, label)."""
    return [(_relative(path), _relative(path)) for path in known_datasets()]


class EvalStartForm(forms.Form):
    """Which dataset, which profiles, offline or not."""

    dataset = forms.ChoiceField(label="Dataset", choices=())
    profiles = forms.MultipleChoiceField(
        label="Profiles",
        choices=(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    variants = forms.CharField(
        label="Other profile variants",
        required=False,
        help_text="Comma-separated, NAME:OPTION=VALUE+OPTION=VALUE, e.g. balanced:rerank.kind=none",
    )
    offline = forms.BooleanField(
        label="Offline (extractive answers, heuristic judges, no network)",
        required=False,
        initial=True,
    )
    without_cross_encoder = forms.BooleanField(
        label="Run profiles without their cross-encoder when none is configured (labelled)",
        required=False,
    )
    k = forms.CharField(label="k values", initial="5,10", max_length=50)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        choices = dataset_choices()
        self.fields["dataset"].choices = choices
        if choices:
            self.fields["dataset"].initial = choices[0][0]
        self.fields["profiles"].choices = [(name, name) for name in profile_names()]
        self.fields["profiles"].initial = ["fast"]

    def clean_k(self) -> list[int]:
        text = self.cleaned_data["k"]
        try:
            values = [int(part) for part in text.split(",") if part.strip()]
        except ValueError:
            raise forms.ValidationError("whole numbers separated by commas, e.g. 5,10") from None
        if not values or min(values) < 1:
            raise forms.ValidationError("at least one k, each at least 1")
        return values

    def compare(self) -> list[str]:
        """The profile specs to compare, checked boxes first."""
        specs = list(self.cleaned_data.get("profiles") or [])
        specs += [v.strip() for v in (self.cleaned_data.get("variants") or "").split(",")]
        return [s for s in specs if s]

    def clean(self) -> dict[str, object]:
        cleaned = super().clean() or {}
        if not self.errors and not self.compare():
            raise forms.ValidationError("choose at least one profile")
        return cleaned

    def dataset_path(self) -> Path:
        return Path(settings.BASE_DIR) / self.cleaned_data["dataset"]


class CaseFilterForm(forms.Form):
    """The filter above a run's cases table (a GET form; also what the CSV export reads)."""

    q = forms.CharField(label="Search", required=False, max_length=200)
    profile = forms.ChoiceField(label="Profile", required=False, choices=())
    outcome = forms.ChoiceField(label="Outcome", required=False, choices=())

    def __init__(self, *args: Any, profiles: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["q"].widget.attrs.update(
            {"placeholder": "case id, question or failure detail", "type": "search"}
        )
        cast(forms.ChoiceField, self.fields["profile"]).choices = [
            ("", "every profile"),
            *[(label, label) for label in profiles],
        ]
        cast(forms.ChoiceField, self.fields["outcome"]).choices = [
            ("", "every outcome"),
            (OUTCOME_PASSED, "passed"),
            (OUTCOME_FAILED, "failed (any stage)"),
            *EvalCaseResult.Stage.choices,
        ]

    def filters(self) -> CaseFilter:
        """The filter asked for; an invalid field (an unknown profile) counts as not given."""
        self.is_valid()
        data = self.cleaned_data
        return CaseFilter(
            text=data.get("q") or "",
            profile=data.get("profile") or "",
            outcome=data.get("outcome") or "",
            sort=(self.data.get("sort") or DEFAULT_CASE_SORT)[:20],
        )
