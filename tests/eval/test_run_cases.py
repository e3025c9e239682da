"""A run's cases table: filter (text, profile, outcome), sort by column, CSV export; the trend chart.

Rendered with the Django test client over runs the real harness executed.
"""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.test import Client
from django.urls import reverse

from eval_app import charts
from eval_app.harness import eval_run_create, eval_run_execute
from eval_app.models import EvalCaseResult
from eval_app.selectors import metric_series

pytestmark = pytest.mark.django_db

STRICT = "fast:floor.min_vector_similarity=0.99"
ROW = re.compile(
    r'<tr>\s*<td><a href="[^"]+">(?P<case>[^<]+)</a>.*?<td class="profile">(?P<profile>[^<]+)</td>'
    r'.*?<td class="stage">(?P<stage>.*?)</td>\s*<td class="num">(?P<latency>\d+) ms</td>',
    re.S,
)


@pytest.fixture
def run(tiny_dataset):
    """Four cases under two profiles; the strict one declines every answer."""
    return eval_run_execute(
        run=eval_run_create(dataset_path=tiny_dataset, compare=f"fast,{STRICT}", offline=True)
    )


@pytest.fixture
def reader(client, staff):
    """Staff: evaluation runs over the harness's own corpora are theirs to read."""
    client.force_login(staff)
    return client


def _rows(html: str) -> list[dict[str, str]]:
    return [m.groupdict() for m in ROW.finditer(html)]


def _page(reader, run, query: str = "") -> str:  # type: ignore[no-untyped-def]
    response = reader.get(reverse("eval:run", args=[run.pk]) + query)
    assert response.status_code == 200
    return response.content.decode()


def test_the_table_lists_every_case_of_every_profile_by_default(reader, run):
    rows = _rows(_page(reader, run))
    assert len(rows) == 8
    assert [r["case"] for r in rows] == sorted(r["case"] for r in rows)
    assert {r["profile"] for r in rows} == {"fast", STRICT}


def test_filter_by_profile_outcome_and_text(reader, run):
    strict = _rows(_page(reader, run, f"?profile={STRICT}"))
    assert {r["profile"] for r in strict} == {STRICT}
    assert len(strict) == 4

    passed = _rows(_page(reader, run, "?outcome=passed"))
    expected = run.results.filter(failure_stage="").count()
    assert 0 < len(passed) == expected
    assert all("passed" in r["stage"] for r in passed)

    refusals = _rows(_page(reader, run, "?outcome=wrong_refusal"))
    wanted = run.results.filter(failure_stage="wrong_refusal")
    assert sorted((r["case"], r["profile"]) for r in refusals) == sorted(
        wanted.values_list("case_id", "profile")
    )
    assert all("Wrong refusal" in r["stage"] for r in refusals)

    failed = _rows(_page(reader, run, "?outcome=failed"))
    assert len(failed) == run.results.exclude(failure_stage="").count()

    sourdough = _rows(_page(reader, run, "?q=SOURDOUGH"))
    assert {r["case"] for r in sourdough} == {"bake"}

    none = _page(reader, run, "?q=no+such+words")
    assert _rows(none) == []
    assert "No case matches the filter." in none


def test_sort_by_latency_both_ways_and_by_outcome(reader, run):
    up = _rows(_page(reader, run, "?sort=latency"))
    assert [int(r["latency"]) for r in up] == sorted(int(r["latency"]) for r in up)
    down = _page(reader, run, "?sort=-latency")
    assert [int(r["latency"]) for r in _rows(down)] == sorted(
        (int(r["latency"]) for r in up), reverse=True
    )
    assert 'aria-sort="descending"' in down

    outcome = _rows(_page(reader, run, "?sort=outcome"))
    passed = [i for i, r in enumerate(outcome) if "passed" in r["stage"]]
    assert passed == list(range(len(passed)))  # passed first, then the failures


def test_sort_links_keep_the_filter_and_flip_the_direction(reader, run):
    html = _page(reader, run, "?profile=fast&sort=latency")
    links = dict(re.findall(r'<a href="\?([^"#]*)#cases-h"[^>]*class="sort">(\w+)', html))
    by_label = {label: query for query, label in links.items()}
    assert by_label["Latency"] == "profile=fast&amp;sort=-latency"
    assert by_label["Case"] == "profile=fast"
    assert by_label["Profile"] == "profile=fast&amp;sort=profile"


def test_htmx_filter_swaps_just_the_table(reader, run):
    response = reader.get(
        reverse("eval:run", args=[run.pk]) + "?outcome=passed",
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="cases",
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="cases"')
    assert "<html" not in html and "Failed cases by stage" not in html
    assert len(_rows(html)) == run.results.filter(failure_stage="").count()


def test_csv_export_holds_the_filtered_cases_with_their_metrics(reader, run):
    url = reverse("eval:cases_csv", args=[run.pk])
    page = _page(reader, run, "?profile=fast&sort=-latency")
    assert f"{url}?profile=fast&amp;sort=-latency" in page

    response = reader.get(url + "?profile=fast&sort=-latency")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert f"eval-run-{run.pk}-cases.csv" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 4
    assert {r["profile"] for r in rows} == {"fast"}
    latencies = [float(r["latency_ms"]) for r in rows]
    assert latencies == sorted(latencies, reverse=True)
    steps = next(r for r in rows if r["case_id"] == "steps")
    stored = run.results.get(profile="fast", case_id="steps")
    assert steps["question"] == stored.question
    assert steps["outcome"] == "passed" if stored.passed else steps["failure_stage"]
    assert float(steps["recall@5"]) == stored.metrics["recall@5"]
    assert steps["mrr"] != ""

    everything = list(csv.DictReader(io.StringIO(reader.get(url).content.decode())))
    assert len(everything) == 8


def test_csv_cells_never_start_a_spreadsheet_formula(reader, run):
    EvalCaseResult.objects.filter(run=run, case_id="steps").update(
        question='=HYPERLINK("http://evil.example","click")'
    )
    rows = list(
        csv.DictReader(
            io.StringIO(reader.get(reverse("eval:cases_csv", args=[run.pk])).content.decode())
        )
    )
    steps = [r for r in rows if r["case_id"] == "steps"]
    assert steps and all(r["question"].startswith("'=HYPERLINK") for r in steps)


def test_csv_export_needs_a_login_and_a_run(reader, run):
    anonymous = Client().get(reverse("eval:cases_csv", args=[run.pk]))
    assert anonymous.status_code == 302
    assert reverse("login") in anonymous["Location"]
    assert reader.get(reverse("eval:cases_csv", args=[999999])).status_code == 404


def test_profiles_of_one_run_are_drawn_side_by_side_over_time(run, tiny_dataset):
    second = eval_run_execute(
        run=eval_run_create(dataset_path=tiny_dataset, compare=f"fast,{STRICT}", offline=True)
    )
    series = metric_series(dataset_name=run.dataset_name, metrics=["mrr"])["mrr"]
    figure = charts.metric_over_time_figure("mrr", series)
    xs = {trace.name: list(trace.x) for trace in figure.data}
    assert set(xs) == {"fast", STRICT}
    for index, finished in enumerate([run.finished_at, second.finished_at]):
        fast, strict = xs["fast"][index], xs[STRICT][index]
        assert fast != strict
        # Centred on the run's real time, one on each side.
        assert fast < finished < strict
        assert (finished - fast) == (strict - finished)
    # A small share of the axis: a profile's point never passes the next run's.
    assert xs[STRICT][0] < xs["fast"][1]


def test_pages_with_figures_keep_them_sized_to_their_boxes(reader, run):
    html = _page(reader, run)
    assert "eval/figures.js" in html
    assert "eval/figures.js" in reader.get(reverse("eval:dashboard")).content.decode()
