"""A large collection's sources, an original file and the API token, in headless Chromium."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.files.base import ContentFile
from django.utils import timezone
from playwright.sync_api import expect

from collections_app.models import CollectionMembership, Source
from collections_app.services import collection_create
from tests.support.factories import SourceFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def big_collection(user, settings, tmp_path):  # type: ignore[no-untyped-def]
    """120 sources: 100 chapters of a manual and 20 meeting notes, one of them a stored upload."""
    settings.MEDIA_ROOT = tmp_path / "media"
    collection = collection_create(name="Manual", slug="manual", user=user)
    now = timezone.now()
    for n in range(100):
        SourceFactory(
            collection=collection,
            location=f"/srv/manual/chapter-{n:03d}.md",
            title=f"Chapter {n:03d}",
            size_bytes=1000 + n,
            chunk_count=3,
            content_hash=f"{n:064x}",
            ingested_at=now - timedelta(minutes=n),
        )
    for n in range(20):
        SourceFactory(
            collection=collection,
            location=f"upload:minutes-{n:02d}.md",
            origin=Source.Origin.UPLOAD,
            title=f"Board minutes {2000 + n}",
            size_bytes=200,
        )
    stored = Source.objects.get(location="upload:minutes-07.md")
    stored.file.save("minutes-07.md", ContentFile(b"# Board minutes 2007\n\nBudget approved.\n"))
    assert CollectionMembership.objects.filter(collection=collection, user=user).exists()
    return collection


def test_finding_paging_and_downloading_in_a_large_collection(
    page, live_server, login, big_collection, screenshot
):
    login(page)
    page.goto(f"{live_server.url}/collections/manual/")
    rows = page.locator("#sources tbody tr")
    expect(rows).to_have_count(50)
    expect(page.locator("#sources-count")).to_contain_text("120 documents · showing 1")
    screenshot(page, "sources-page-1")

    page.get_by_role("link", name="Next").click()
    expect(page.locator("#sources-count")).to_contain_text("showing 51")
    assert parse_qs(urlsplit(page.url).query)["page"] == ["2"]

    # Typing filters the table in place, without a page load.
    page.evaluate("window.notReloaded = true")
    page.get_by_label("Find documents by title or location").fill("board minutes")
    expect(rows).to_have_count(20)
    expect(page.locator("#sources-count")).to_contain_text("20 of 120 documents match")
    assert page.evaluate("window.notReloaded") is True
    assert parse_qs(urlsplit(page.url).query)["q"] == ["board minutes"]

    # A second click on the sorted column reverses it; the search stays.
    page.get_by_role("link", name="Document").click()
    expect(rows.first).to_contain_text("Board minutes 2019")
    screenshot(page, "sources-search-sorted")

    page.get_by_role("link", name="Board minutes 2007").click()
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download original").click()
    download = download_info.value
    assert download.suggested_filename == "minutes-07.md"
    assert Path(download.path()).read_bytes() == b"# Board minutes 2007\n\nBudget approved.\n"
    screenshot(page, "source-with-download")


def test_getting_an_api_token_from_the_navigation(page, live_server, login, screenshot):
    login(page)
    page.get_by_role("link", name="API token").click()
    expect(page.get_by_role("heading", name="No token yet")).to_be_visible()

    page.get_by_role("button", name="Create a token").click()
    token = page.get_by_label("Your new API token")
    expect(token).to_have_value(re.compile(r"^[0-9a-f]{40}$"))
    key = token.input_value()
    screenshot(page, "api-token-created")

    response = page.request.get(
        f"{live_server.url}/api/collections", headers={"Authorization": f"Token {key}"}
    )
    assert response.status == 200

    page.reload()
    expect(page.get_by_label("Your new API token")).to_have_count(0)
    expect(page.get_by_text(f"…{key[-4:]}")).to_be_visible()
