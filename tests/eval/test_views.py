"""The evaluation pages, rendered with the Django test client."""

from __future__ import annotations

import pytest
from django.urls import reverse

from eval_app.harness import eval_run_create, eval_run_execute
from eval_app.models import EvalRun

pytestmark = pytest.mark.django_db

PLOT_DIV = 'class="plotly-graph-div"'


@pytest.fixture
def two_runs(tiny_dataset):
    """Two finished runs of the tiny dataset; the second one declines everything."""
    first = eval_run_execute(
        run=eval_run_create(dataset_path=tiny_dataset, compare="fast", offline=True)
    )
    second = eval_run_execute(
        run=eval_run_create(
            dataset_path=tiny_dataset,
            compare="fast,fast:floor.min_vector_similarity=0.99",
            offline=True,
        )
    )
    return first, second


@pytest.fixture
def reader_client(client, staff):
    """Staff: runs over the harness's own corpora are theirs (tests/eval/test_eval_permissions.py)."""
    client.force_login(staff)
    return client


def test_pages_need_a_login(client):
    response = client.get(reverse("eval:dashboard"))
    assert response.status_code == 302
    assert reverse("login") in response["Location"]


def test_dashboard_plots_metrics_over_time_with_bundled_plotly(reader_client, two_runs):
    response = reader_client.get(reverse("eval:dashboard"))
    html = response.content.decode()
    assert response.status_code == 200
    assert PLOT_DIV in html
    assert "tiny-eval" in html
    assert reverse("eval:plotly_js") in html
    assert "cdn.plot.ly" not in html and "cdn.jsdelivr" not in html
    # Staff may start a run (others see no form: test_eval_permissions.py).
    assert 'action="/eval/runs/start/"' in html


def test_plotly_js_is_served_from_the_package(client):
    response = client.get(reverse("eval:plotly_js"))
    assert response.status_code == 200
    body = b"".join(response.streaming_content)
    assert b"plotly.js" in body[:2000]
    assert "max-age" in response["Cache-Control"]


def test_run_list_shows_every_run(reader_client, two_runs):
    response = reader_client.get(reverse("eval:runs"))
    html = response.content.decode()
    assert response.status_code == 200
    for run in two_runs:
        assert reverse("eval:run", args=[run.pk]) in html


def test_run_page_shows_table_stages_plots_and_judges(reader_client, two_runs):
    run = two_runs[1]
    response = reader_client.get(reverse("eval:run", args=[run.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert html.count(PLOT_DIV) == 2  # failure stages and quality against latency
    assert "recall@5" in html and "0.667 [" in html
    assert "Wrong refusal" in html  # failure stage of the strict variant
    assert "fast:floor.min_vector_similarity=0.99" in html
    assert "manual.pdf" in html  # the source that failed to ingest
    assert "heuristic" in html
    assert reverse("eval:case", args=[run.pk, "steps"]) in html


def test_compare_page_says_when_runs_share_no_profile(reader_client, two_runs, tiny_dataset):
    first, _second = two_runs
    strict = eval_run_execute(
        run=eval_run_create(
            dataset_path=tiny_dataset, compare="fast:floor.min_vector_similarity=0.99", offline=True
        )
    )
    response = reader_client.get(reverse("eval:compare") + f"?a={first.pk}&b={strict.pk}")
    assert response.status_code == 200
    assert b"no profile in common" in response.content


def test_compare_page_without_two_runs_goes_back_to_the_list(reader_client):
    response = reader_client.get(reverse("eval:compare") + "?a=1")
    assert response.status_code == 302
    assert response["Location"] == reverse("eval:runs")


def test_compare_page_finds_broken_cases(reader_client, tiny_dataset, settings):
    before = eval_run_execute(
        run=eval_run_create(dataset_path=tiny_dataset, compare="fast", offline=True)
    )
    settings.RAG = {
        **settings.RAG,
        "profiles": {"fast": {"floor": {"min_vector_similarity": 0.99}}},
    }
    after = eval_run_execute(
        run=eval_run_create(dataset_path=tiny_dataset, compare="fast", offline=True)
    )
    html = reader_client.get(reverse("eval:compare") + f"?a={before.pk}&b={after.pk}").content
    html = html.decode()
    assert "0 fixed, 2 broken" in html
    assert reverse("eval:case", args=[after.pk, "steps"]) in html
    assert reverse("eval:case", args=[after.pk, "bake"]) in html


def test_case_page_shows_each_profiles_passages_and_trace(reader_client, two_runs):
    run = two_runs[1]
    response = reader_client.get(reverse("eval:case", args=[run.pk, "steps"]))
    html = response.content.decode()
    assert response.status_code == 200
    assert "How many steps does the lighthouse keeper climb" in html
    assert html.count('<h2 id="profile-') == 2
    assert "lighthouse.md" in html
    assert "212" in html
    for stage in ("retrieve", "rerank", "assemble", "generate"):
        assert stage in html


def test_unknown_run_and_case_are_404(reader_client, two_runs):
    assert reader_client.get(reverse("eval:run", args=[999999])).status_code == 404
    url = reverse("eval:case", args=[two_runs[0].pk, "no-such-case"])
    assert reader_client.get(url).status_code == 404


def test_progress_partial_polls_while_running_and_reloads_when_done(reader_client, tiny_dataset):
    run = eval_run_create(dataset_path=tiny_dataset, compare="fast", offline=True)
    url = reverse("eval:run", args=[run.pk])
    partial = reader_client.get(url + "?poll=1", HTTP_HX_REQUEST="true")
    assert 'hx-trigger="every 1s"' in partial.content.decode()
    assert "<html" not in partial.content.decode()
    assert "HX-Refresh" not in partial
    eval_run_execute(run=run)
    done = reader_client.get(url + "?poll=1", HTTP_HX_REQUEST="true")
    assert done["HX-Refresh"] == "true"
    assert "every 1s" not in done.content.decode()


def test_staff_start_a_run_that_runs_in_the_background(
    client, staff, tiny_dataset, settings, celery_eager, django_capture_on_commit_callbacks
):
    settings.EVAL_DATASETS_DIR = tiny_dataset.parent
    client.force_login(staff)
    page = client.get(reverse("eval:dashboard")).content.decode()
    assert "dataset.yaml" in page and 'name="offline"' in page

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("eval:start"),
            {"dataset": str(tiny_dataset), "profiles": ["fast"], "offline": "on", "k": "5,10"},
        )
    run = EvalRun.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("eval:run", args=[run.pk])
    assert run.status == EvalRun.Status.SUCCEEDED
    assert run.created_by == staff
    assert run.results.count() == 4
    assert run.aggregates["fast"]["metrics"]["recall@5"]["value"] == pytest.approx(2 / 3)


def test_start_form_reports_an_unknown_profile_without_starting(
    client, staff, tiny_dataset, settings
):
    settings.EVAL_DATASETS_DIR = tiny_dataset.parent
    client.force_login(staff)
    response = client.post(
        reverse("eval:start"),
        {"dataset": str(tiny_dataset), "variants": "turbo", "offline": "on", "k": "5"},
    )
    assert response.status_code == 400
    assert "unknown profile" in response.content.decode()
    assert not EvalRun.objects.exists()


def test_readers_cannot_start_or_cancel_runs(client, user, tiny_dataset, settings):
    """alice, without staff rights (a queued run is not hers to see either: 404)."""
    client.force_login(user)
    reader_client = client
    settings.EVAL_DATASETS_DIR = tiny_dataset.parent
    response = reader_client.post(
        reverse("eval:start"), {"dataset": str(tiny_dataset), "profiles": ["fast"], "k": "5"}
    )
    assert response.status_code == 302
    assert not EvalRun.objects.exists()
    run = eval_run_create(dataset_path=tiny_dataset, compare="fast", offline=True)
    reader_client.post(reverse("eval:cancel", args=[run.pk]))
    run.refresh_from_db()
    assert not run.cancel_requested


def test_staff_cancel_a_queued_run(client, staff, tiny_dataset):
    client.force_login(staff)
    run = eval_run_create(dataset_path=tiny_dataset, compare="fast", offline=True)
    client.post(reverse("eval:cancel", args=[run.pk]))
    run.refresh_from_db()
    assert run.status == EvalRun.Status.CANCELLED


def test_dashboard_shows_corrective_and_adaptive_with_each_profiles_cost(
    reader_client, tiny_dataset
):
    run = eval_run_execute(
        run=eval_run_create(
            dataset_path=tiny_dataset,
            compare="fast,corrective,adaptive",
            offline=True,
            without_cross_encoder=True,
        )
    )
    assert run.status == EvalRun.Status.SUCCEEDED
    response = reader_client.get(reverse("eval:dashboard"))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Cost per profile" in html
    assert 'id="profile-cost"' in html  # the cost chart
    table = html.split('class="eval-costs"', 1)[1].split("</table>", 1)[0]
    rows = {
        label: table.split(f'<th scope="row">{label}', 1)[1].split("</tr>", 1)[0]
        for label in run.profiles
    }
    assert {label.split(":")[0] for label in rows} == {"fast", "corrective", "adaptive"}
    stages = {}
    for label, row in rows.items():
        cells = [c.split("</td>")[0] for c in row.split("<td>")[1:]]
        cases, calls, steps, p50, p95 = cells
        assert cases == "4"
        assert calls == "0.00"  # offline: no chat model
        assert p50.endswith(" ms") and p95.endswith(" ms")
        stages[label.split(":")[0]] = float(steps)
    # The corrective graph runs more nodes (triage, evaluate, ...) than the fast path.
    assert stages["corrective"] > stages["fast"] > 0
    # The trend charts draw corrective and adaptive like the other profiles.
    assert html.count(PLOT_DIV) >= 2
    trend = html.split('id="trend-h"', 1)[1].split('id="cost-h"', 1)[0]
    for label in run.profiles:
        assert label in trend
