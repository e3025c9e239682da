"""The web fallback on the pages: the collection's switch, the ask page's box, web citations.

The search engine and the web site are scripted servers on loopback
(tests/support/search_server.py); only the site's host:port is allowed past
the address check, as a deployment would name an intranet host.
"""

from __future__ import annotations

import html
from collections.abc import Iterator

import pytest

from collections_app.models import Chunk, Collection, Source
from query_app.models import QueryRun
from tests.support.clients import token_client
from tests.support.search_server import ScriptedSearchServer, html_page

pytestmark = pytest.mark.django_db

MERCURY = "What is the boiling point of mercury at sea level?"


@pytest.fixture
def site() -> Iterator[ScriptedSearchServer]:
    server = ScriptedSearchServer().start()
    server.pages = {
        "/mercury": html_page(
            "Mercury (element)",
            "<p>At sea level the boiling point of mercury is 356.7 degrees Celsius.</p>",
        )
    }
    yield server
    server.stop()


@pytest.fixture
def web_search(rag_set, search, site, no_chat_model) -> ScriptedSearchServer:
    rag_set(
        "web_search",
        {"url": search.base_url, "timeout_s": 2.0, "allow_hosts": [site.host]},
    )
    search.results = [{"url": site.url("/mercury"), "title": "Mercury"}]
    return search


def allow(collection: Collection) -> None:
    collection.web_fallback = True
    collection.save(update_fields=["web_fallback"])


def test_a_collection_admin_switches_the_web_fallback_on_and_off(alice, collection):
    page = alice.get("/collections/handbook/edit/").content.decode()
    assert 'action="/collections/handbook/web-fallback/"' in page
    assert "Allow the web fallback" in page
    response = alice.post(
        "/collections/handbook/web-fallback/", {"web_fallback": "on"}, follow=True
    )
    assert "Web fallback allowed" in response.content.decode()
    collection.refresh_from_db()
    assert collection.web_fallback is True
    alice.post("/collections/handbook/web-fallback/", {})
    collection.refresh_from_db()
    assert collection.web_fallback is False


def test_a_reader_cannot_switch_it(reader, collection):
    response = reader.post(
        "/collections/handbook/web-fallback/", {"web_fallback": "on"}, follow=True
    )
    assert "You may not administer" in html.unescape(response.content.decode())
    collection.refresh_from_db()
    assert collection.web_fallback is False


def test_the_ask_page_offers_the_box_only_where_the_collection_allows_it(
    alice, collection, web_search
):
    page = alice.get("/ask/?collection=handbook").content.decode()
    assert "data-web-fallback" not in page  # no collection allows it
    allow(collection)
    page = alice.get("/ask/?collection=handbook").content.decode()
    box = page.split("data-web-fallback", 1)[1].split("</label>", 1)[0]
    assert 'data-collections="handbook"' in box
    assert 'data-profiles="adaptive,corrective"' in box
    # The default profile (fast) does not search the web: hidden and disabled until
    # the asker picks corrective or adaptive (ask.js).
    assert " hidden" in box and " disabled" in box


def test_the_box_is_off_without_a_search_server(alice, collection, rag_set):
    allow(collection)
    rag_set("web_search", {"url": ""})
    assert "data-web-fallback" not in alice.get("/ask/").content.decode()


def test_asking_for_it_where_it_is_not_allowed_is_an_error_on_the_page(alice, ingested, web_search):
    data = {
        "collection": "handbook",
        "profile": "corrective",
        "question": MERCURY,
        "web_fallback": "on",
    }
    page = html.unescape(alice.post("/ask/", data, follow=True).content.decode())
    assert "Web fallback is not allowed on the collection 'handbook'" in page
    assert QueryRun.objects.count() == 0
    assert web_search.requests == []


def test_the_api_refuses_it_with_a_400(user, ingested, web_search):
    api = token_client(user)
    response = api.post(
        "/api/collections/handbook/query",
        {"question": MERCURY, "profile": "corrective", "web_fallback": True},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["code"] == "web_fallback_not_allowed"
    assert "not allowed on the collection 'handbook'" in response.json()["detail"]


def test_web_citations_show_and_link_their_address(alice, ingested, web_search, site):
    allow(ingested)
    sources, chunks = Source.objects.count(), Chunk.objects.count()
    data = {
        "collection": "handbook",
        "profile": "corrective",
        "question": MERCURY,
        "web_fallback": "on",
    }
    page = html.unescape(alice.post("/ask/", data).content.decode())
    run = QueryRun.objects.get()
    assert "356.7 degrees Celsius" in run.answer
    url = site.url("/mercury")
    assert '<span class="badge web"' in page
    assert f'href="{url}" rel="noopener noreferrer nofollow">{url}</a>' in page
    web = next(c for c in run.citations if c["cited"])
    passage = html.unescape(
        alice.get(f"/history/{run.pk}/passages/{web['marker']}/").content.decode()
    )
    assert f'<a href="{url}" rel="noopener noreferrer nofollow" data-source-link>' in passage
    assert "from the web" in passage
    # The run reopens with the request's choice; nothing was added to the collection.
    assert run.overrides.get("web.enabled") is True
    assert (Source.objects.count(), Chunk.objects.count()) == (sources, chunks)
