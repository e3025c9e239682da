"""The evaluation pages in headless Chromium: figures that fit their boxes, tables that
fit their cards, and the cases table's filter, sort and CSV export.

Runs are executed by the real harness (offline: extractive answers, the real
embedder and database) before the browser opens the pages.
"""

from __future__ import annotations

import csv
import io
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from eval_app.harness import eval_run_create, eval_run_execute
from tests.support.eval_corpus import STRICT_PROFILE, eval_dataset_write

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# How far (CSS px) a drawing may pass its box: rounding only.
SLACK = 1


@pytest.fixture
def runs(tmp_path, user):
    """Two finished runs of the planted dataset, each comparing two profiles; alice is staff."""
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    dataset = eval_dataset_write(tmp_path / "dataset")
    return [
        eval_run_execute(
            run=eval_run_create(
                dataset_path=dataset, compare=f"fast,{STRICT_PROFILE}", offline=True
            )
        )
        for _ in range(2)
    ]


def _overflowing_figures(page) -> list[dict[str, float]]:  # type: ignore[no-untyped-def]
    """Figures drawn wider than the box they sit in."""
    return page.evaluate(
        """(slack) => Array.from(document.querySelectorAll('.eval-figure')).map((box) => {
            const svg = box.querySelector('.main-svg');
            return {id: box.querySelector('.plotly-graph-div').id,
                    box: box.getBoundingClientRect().width,
                    drawn: svg ? svg.getBoundingClientRect().width : -1};
        }).filter((f) => f.drawn < 0 || f.drawn > f.box + slack)""",
        SLACK,
    )


def test_dashboard_figures_are_drawn_inside_their_boxes_from_the_start(
    page, live_server, login, runs, screenshot
):
    login(page)
    page.goto(f"{live_server.url}/eval/")
    expect(page.locator(".eval-figure .main-svg").first).to_be_visible()
    page.wait_for_load_state("load")
    figures = page.locator(".eval-figure")
    assert figures.count() >= 4
    # No window resize happened: the first figure must already fit.
    assert _overflowing_figures(page) == []
    first = page.locator(".eval-figure").first.bounding_box()
    second = page.locator(".eval-figure").nth(1).bounding_box()
    assert first is not None and second is not None
    assert first["width"] == pytest.approx(second["width"], abs=SLACK)
    screenshot(page, "eval-dashboard")

    # And they follow the window when it does change.
    page.set_viewport_size({"width": 900, "height": 900})
    page.wait_for_function(
        """() => Array.from(document.querySelectorAll('.eval-figure')).every((box) =>
            box.querySelector('.main-svg').getBoundingClientRect().width
              <= box.getBoundingClientRect().width + 1)"""
    )


def test_profiles_of_one_run_are_drawn_apart_on_the_trend_chart(page, live_server, login, runs):
    login(page)
    page.goto(f"{live_server.url}/eval/")
    expect(page.locator("#trend-0 .main-svg").first).to_be_visible()
    # Screen x of each profile's points (plotly draws one path per marker).
    xs = page.evaluate(
        """() => Array.from(document.querySelectorAll('#trend-0 .scatterlayer .trace')).map(
            (trace) => Array.from(trace.querySelectorAll('.points path')).map(
                (p) => p.getBoundingClientRect().x))"""
    )
    assert len(xs) == 2 and all(len(points) == 2 for points in xs)
    for run_index in range(2):
        assert abs(xs[0][run_index] - xs[1][run_index]) >= 4, xs


def test_the_failed_by_stage_table_fits_its_card(page, live_server, login, runs, screenshot):
    run = runs[-1]
    login(page)
    for width in (1280, 700):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/eval/runs/{run.pk}/")
        table = page.locator("#stages-table table")
        expect(table).to_be_visible()
        fits = page.evaluate(
            """() => {
                const card = document.querySelector('#stages-table');
                const wrap = card.querySelector('.table-wrap');
                const table = card.querySelector('table');
                const right = card.getBoundingClientRect().right;
                return {
                    tableInside: table.getBoundingClientRect().right <= right + 1,
                    scrolls: wrap.scrollWidth > wrap.clientWidth,
                    cardInside: right <= document.documentElement.clientWidth + 1,
                };
            }"""
        )
        # The table either fits inside its card or scrolls within it; never cut off.
        assert fits["cardInside"], fits
        assert fits["tableInside"] or fits["scrolls"], fits
        headers = page.locator("#stages-table thead th")
        expect(headers.filter(has_text=STRICT_PROFILE)).to_be_visible()
        screenshot(page, f"eval-run-{width}")


def test_cases_are_filtered_sorted_and_exported_as_csv(page, live_server, login, runs, screenshot):
    run = runs[-1]
    login(page)
    page.goto(f"{live_server.url}/eval/runs/{run.pk}/")
    rows = page.locator("#cases tbody tr")
    expect(rows).to_have_count(8)

    page.get_by_label("Profile", exact=True).select_option(STRICT_PROFILE)
    expect(rows).to_have_count(4)
    expect(page.locator("#cases tbody td.profile").filter(has_text="fast")).to_have_count(4)
    # The address holds the filter: it can be bookmarked and shared.
    assert parse_qs(urlparse(page.url).query)["profile"] == [STRICT_PROFILE]

    page.get_by_label("Profile", exact=True).select_option("")
    page.get_by_label("Search").fill("sourdough")
    expect(rows).to_have_count(2)
    expect(page.locator("#cases tbody")).to_contain_text("bake")

    page.get_by_label("Search").fill("")
    expect(rows).to_have_count(8)
    outcome = run.results.exclude(failure_stage="").values_list("failure_stage", flat=True)[0]
    page.get_by_label("Outcome").select_option(outcome)
    expect(rows).to_have_count(run.results.filter(failure_stage=outcome).count())
    page.get_by_label("Outcome").select_option("")
    expect(rows).to_have_count(8)

    page.locator("#cases thead").get_by_role("link", name="Latency").click()
    expect(page.locator("#cases th[aria-sort=ascending]")).to_contain_text("Latency")
    page.locator("#cases thead").get_by_role("link", name="Latency").click()
    expect(page.locator("#cases th[aria-sort=descending]")).to_contain_text("Latency")
    shown = [int(t.split()[0]) for t in page.locator("#cases tbody td.num").all_inner_texts()]
    assert shown == sorted(shown, reverse=True)

    # The order survives a filter change (it travels with the form).
    page.get_by_label("Profile", exact=True).select_option("fast")
    expect(rows).to_have_count(4)
    expect(page.locator("#cases th[aria-sort=descending]")).to_contain_text("Latency")
    screenshot(page, "eval-cases-filtered")

    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download these as CSV").click()
    download = download_info.value
    assert download.suggested_filename == f"eval-run-{run.pk}-cases.csv"
    with open(download.path(), encoding="utf-8") as exported_file:
        exported = list(csv.DictReader(io.StringIO(exported_file.read())))
    table_cases = [
        t.strip() for t in page.locator("#cases tbody td:first-child > a").all_inner_texts()
    ]
    assert [r["case_id"] for r in exported] == table_cases
    assert {r["profile"] for r in exported} == {"fast"}
