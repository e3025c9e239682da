"""Who sees an evaluation run: the permission of the collection it evaluated (issue 13, item 7).

A run stores the passages, answers and rankings of its collection. Runs over the
harness's own corpora (evaluation collections) are for staff; a run over a
workspace collection needs read access to that collection; superusers see all.
Before, any logged-in user read every case page, passages included, although the
API answered 404 for the same collection. Runs are executed by the real harness.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from collections_app.services import collection_create, membership_set
from eval_app.harness import eval_run_create, eval_run_execute
from eval_app.models import EvalRun

pytestmark = pytest.mark.django_db

PASSAGE = "212 steps"


@pytest.fixture
def run(tiny_dataset):
    return eval_run_execute(
        run=eval_run_create(dataset_path=tiny_dataset, compare="fast", offline=True)
    )


def _client(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def alice(user) -> Client:
    """A user without staff rights."""
    return _client(user)


@pytest.fixture
def maintainer(staff) -> Client:
    return _client(staff)


def _pages(run: EvalRun) -> list[str]:
    return [
        reverse("eval:run", args=[run.pk]),
        reverse("eval:case", args=[run.pk, "steps"]),
        reverse("eval:cases_csv", args=[run.pk]),
    ]


def test_a_user_without_staff_rights_sees_nothing_of_an_evaluation_corpus(alice, run):
    assert run.collection.is_evaluation
    for url in _pages(run):
        response = alice.get(url)
        assert response.status_code == 404, url
        assert PASSAGE not in response.content.decode()
    compare = alice.get(reverse("eval:compare") + f"?a={run.pk}&b={run.pk}")
    assert compare.status_code == 302 and compare["Location"] == reverse("eval:runs")
    for url in (reverse("eval:dashboard"), reverse("eval:runs")):
        html = alice.get(url).content.decode()
        assert reverse("eval:run", args=[run.pk]) not in html
        assert "tiny-eval" not in html
    assert "shown to staff" in alice.get(reverse("eval:dashboard")).content.decode()


def test_staff_see_the_runs_of_evaluation_corpora_with_their_passages(maintainer, run):
    for url in _pages(run):
        assert maintainer.get(url).status_code == 200, url
    assert PASSAGE in maintainer.get(_pages(run)[1]).content.decode()
    assert (
        reverse("eval:run", args=[run.pk]) in maintainer.get(reverse("eval:runs")).content.decode()
    )


def test_a_run_over_a_workspace_collection_follows_that_collections_readers(
    run, user, staff, other_user
):
    """Staff without a role on it see nothing; a reader of it (without staff rights) sees it."""
    private = collection_create(name="Private", slug="private", user=other_user)
    EvalRun.objects.filter(pk=run.pk).update(collection=private)
    for url in _pages(run):
        assert _client(staff).get(url).status_code == 404, url
        assert _client(user).get(url).status_code == 404, url
    membership_set(collection=private, user=user, role="read")
    for url in _pages(run):
        assert _client(user).get(url).status_code == 200, url
    assert PASSAGE in _client(user).get(_pages(run)[1]).content.decode()


def test_superusers_see_every_run(run, django_user_model):
    root = django_user_model.objects.create_superuser(username="root", password="pw-root")
    private = collection_create(name="Private", slug="private")
    EvalRun.objects.filter(pk=run.pk).update(collection=private)
    for url in _pages(run):
        assert _client(root).get(url).status_code == 200, url


def test_staff_cannot_cancel_a_run_they_cannot_see(run, staff, other_user):
    private = collection_create(name="Private", slug="private", user=other_user)
    EvalRun.objects.filter(pk=run.pk).update(
        collection=private, status=EvalRun.Status.RUNNING, finished_at=None
    )
    response = _client(staff).post(reverse("eval:cancel", args=[run.pk]))
    assert response.status_code == 404
    run.refresh_from_db()
    assert not run.cancel_requested
