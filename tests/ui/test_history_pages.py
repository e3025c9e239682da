"""History: past questions, search, per-collection filter, reopening and re-running."""

from __future__ import annotations

import pytest

from collections_app.services import collection_create
from query_app.models import Conversation, QueryRun
from query_app.services import QueryRequest, query_answer

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(ingested, user):
    """Two stored answers of alice's, and one of another collection."""
    first = query_answer(
        user=user,
        request=QueryRequest(collection="handbook", question="How much disk space is needed?"),
    )
    second = query_answer(
        user=user,
        request=QueryRequest(collection="handbook", question="When are refunds possible?"),
    )
    other = collection_create(name="Notes", slug="notes", user=user)
    third = QueryRun.objects.create(
        user=user,
        collection=other,
        conversation=Conversation.objects.create(
            owner=user, collection=other, title="Where are the notes?"
        ),
        question="Where are the notes?",
        profile="fast",
        mode="not-found",
        answer="Not found in this collection.",
    )
    return first, second, third


def test_history_without_questions_invites_a_first_one(alice, collection):
    page = alice.get("/history/").content.decode()

    assert "No questions yet" in page
    assert 'href="/ask/"' in page


def test_history_lists_the_users_questions_newest_first(alice, runs):
    page = alice.get("/history/").content.decode()

    positions = [page.index(run.question) for run in reversed(runs)]
    assert positions == sorted(positions)


def test_history_search_finds_questions_and_answers(alice, runs):
    page = alice.get("/history/?q=refunds").content.decode()

    assert "When are refunds possible?" in page
    assert "How much disk space" not in page


def test_history_filters_by_collection(alice, runs):
    page = alice.get("/history/?collection=notes").content.decode()

    assert "Where are the notes?" in page
    assert "When are refunds possible?" not in page


def test_history_filter_swaps_only_the_results_for_htmx(alice, runs):
    response = alice.get("/history/?q=disk", HTTP_HX_REQUEST="true")

    body = response.content.decode()
    assert body.lstrip().startswith('<div id="results">')
    assert "How much disk space" in body


def test_no_match_says_so_and_offers_everything(alice, runs):
    page = alice.get("/history/?q=zebra").content.decode()

    assert "No question matches" in page


def test_other_peoples_questions_are_not_listed(bob, runs):
    assert "disk space" not in bob.get("/history/").content.decode()


def test_reopening_a_stored_answer_shows_it_with_its_trace(alice, runs):
    run = runs[0]

    page = alice.get(f"/history/{run.pk}/").content.decode()

    assert run.question in page
    assert f'href="/history/{run.pk}/passages/1/"' in page
    assert '<details class="stage-retrieve">' in page


def test_a_run_in_a_collection_one_may_not_read_is_not_found(bob, runs):
    run = runs[0]

    assert bob.get(f"/history/{run.pk}/").status_code == 404
    assert bob.get(f"/history/{run.pk}/passages/1/").status_code == 404
    assert bob.post(f"/history/{run.pk}/rerun/", {"profile": "fast"}).status_code == 404


def test_running_again_shows_the_new_answer_beside_the_old(alice, runs):
    old = runs[0]

    response = alice.post(f"/history/{old.pk}/rerun/", {"profile": "fast"}, follow=True)

    new = QueryRun.objects.latest("pk")
    assert new.pk != old.pk and new.question == old.question
    assert response.redirect_chain[-1][0] == f"/history/{new.pk}/?beside={old.pk}"
    page = response.content.decode()
    assert "Compared answers" in page
    assert f'id="run-{old.pk}"' in page and f'id="run-{new.pk}"' in page
    assert page.index(f'id="run-{old.pk}"') < page.index(f'id="run-{new.pk}"')


def test_running_again_with_an_unusable_profile_is_a_message(alice, runs):
    old = runs[0]

    response = alice.post(f"/history/{old.pk}/rerun/", {"profile": "turbo"}, follow=True)

    assert "Unknown profile" in response.content.decode()
    assert QueryRun.objects.count() == 3
