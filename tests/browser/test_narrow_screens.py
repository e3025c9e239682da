"""Every main page fits a 390 px wide phone: nothing scrolls the page sideways.

Headless Chromium opens each page at 390 by 844 and checks that the document is
no wider than the window (``document.documentElement.scrollWidth <= 390``). A
wide table may scroll inside its own box; the page itself must not.
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from collections_app.models import Source
from collections_app.services import collection_create, uploads_accept
from eval_app.harness import eval_run_create, eval_run_execute
from tests.support.documents import INSTALL, PLAIN_INJECTION, REFUNDS, upload
from tests.support.eval_corpus import STRICT_PROFILE, eval_dataset_write

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}

# Elements that stick out of the window, or whose text overflows them, for the
# failure message (what lies inside a scrolling box does not widen the page).
OVERFLOW_REPORT = """(width) => {
    const inScroller = (el) => {
        for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
            if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(p).overflowX)) return true;
        }
        return false;
    };
    const out = [];
    for (const el of document.querySelectorAll('body *')) {
        const box = el.getBoundingClientRect();
        const sticksOut = box.width > 0 && box.right > width + 1;
        const textOverflows = el.scrollWidth > el.clientWidth + 1
            && getComputedStyle(el).overflowX === 'visible' && box.right + el.scrollWidth
               - el.clientWidth > width + 1;
        if ((sticksOut || textOverflows) && !inScroller(el)) {
            const text = (el.textContent || '').trim().slice(0, 40);
            out.push(`${el.tagName.toLowerCase()}.${el.className} "${text}" → ${Math.round(box.right)}px`);
        }
    }
    return out.slice(0, 8);
}"""


@pytest.fixture
def site(user, tmp_path, media_root, celery_eager):
    """alice (staff) with a collection filled through an upload (a finished job, one
    document held in the quarantine) and two evaluation runs."""
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    collection = collection_create(name="Handbook", slug="handbook", user=user)
    intake = uploads_accept(
        collection=collection,
        files=[
            upload("install.md", INSTALL),
            upload("refunds.md", REFUNDS),
            upload("release.md", PLAIN_INJECTION),
        ],
        user=user,
    )
    job = intake.job
    assert job is not None
    job.refresh_from_db()
    assert job.is_finished, job.status
    dataset = eval_dataset_write(tmp_path / "dataset")
    runs = [
        eval_run_execute(
            run=eval_run_create(
                dataset_path=dataset, compare=f"fast,{STRICT_PROFILE}", offline=True
            )
        )
        for _ in range(2)
    ]
    source = Source.objects.get(collection=collection, location="upload:install.md")
    return {"collection": collection, "job": job, "source": source, "runs": runs}


def _overflow(page) -> tuple[int, list[str]]:  # type: ignore[no-untyped-def]
    width = page.evaluate("() => document.documentElement.scrollWidth")
    culprits = page.evaluate(OVERFLOW_REPORT, PHONE["width"]) if width > PHONE["width"] else []
    return width, culprits


def test_every_main_page_fits_a_390px_screen(browser, live_server, login, site, screenshot):
    context = browser.new_context(viewport=PHONE)
    context.set_default_timeout(20_000)
    page = context.new_page()
    try:
        login(page)
        too_wide: dict[str, object] = {}

        def check(name: str) -> None:
            page.wait_for_load_state("load")
            width, culprits = _overflow(page)
            if width > PHONE["width"]:
                too_wide[name] = {"scrollWidth": width, "culprits": culprits}
            screenshot(page, f"phone-{name}")

        # The answer page first: ask, get the extractive answer inline, then its permalink.
        page.goto(f"{live_server.url}/ask/?collection=handbook")
        page.get_by_label("Question").fill("How much free disk space does the installer need?")
        page.get_by_role("button", name="Ask").click()
        answer = page.locator("#answer-area article.answer-card")
        expect(answer.locator(".badge.mode")).to_contain_text("Extractive answer")
        check("ask-answer")
        answer.locator("a.cite").first.click()
        expect(answer.locator(".passage-slot aside.passage")).to_be_visible()
        check("ask-passage")
        page.get_by_role("link", name="Permalink").first.click()
        page.wait_for_url("**/history/*/")
        check("answer")
        run_url = page.url

        slug = site["collection"].slug
        eval_run, earlier = site["runs"][1], site["runs"][0]
        pages = {
            "collections": "/collections/",
            "collection-new": "/collections/new/",
            "collection": f"/collections/{slug}/",
            "collection-edit": f"/collections/{slug}/edit/",
            "collection-delete": f"/collections/{slug}/delete/",
            "members": f"/collections/{slug}/members/",
            "job": f"/collections/{slug}/jobs/{site['job'].pk}/",
            "source": f"/collections/{slug}/sources/{site['source'].pk}/",
            "quarantine": "/quarantine/",
            "quarantine-all": "/quarantine/?status=all&evaluation=1",
            "ask": "/ask/",
            "history": "/history/",
            "passage": run_url.removeprefix(live_server.url) + "passages/1/",
            "eval-dashboard": "/eval/",
            "eval-runs": "/eval/runs/",
            "eval-run": f"/eval/runs/{eval_run.pk}/",
            "eval-case": f"/eval/runs/{eval_run.pk}/cases/steps/",
            "eval-compare": f"/eval/compare/?a={earlier.pk}&b={eval_run.pk}",
        }
        for name, path in pages.items():
            response = page.goto(f"{live_server.url}{path}")
            assert response is not None and response.ok, (name, path)
            check(name)

        page.get_by_role("button", name="Log out").click()
        page.goto(f"{live_server.url}/collections/")
        expect(page.get_by_label("Username")).to_be_visible()
        check("login")

        assert too_wide == {}, json.dumps(too_wide, indent=1)
    finally:
        context.close()
