"""Evaluation corpora stay out of the workspace: lists, the Ask picker, the quarantine queue.

The evaluation harness builds its collections itself ("evaluation" purpose); they
hold planted prompt injections on purpose. People see them only when staff ask
for them, and reach them from the evaluation run pages.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from collections_app.models import Collection, QuarantineItem
from collections_app.services import collection_create, collection_ingest
from eval_app.harness import eval_run_create, eval_run_execute
from tests.support.documents import INSTALL, PLAIN_INJECTION
from tests.support.eval_corpus import EVAL_DATASET_NAME, eval_dataset_write

pytestmark = pytest.mark.django_db

DECIDE = "/quarantine/decide/"


@pytest.fixture
def root(django_user_model):
    """A superuser, like the demo login: admin of every collection, staff."""
    return django_user_model.objects.create_superuser(username="root", password="pw-root")


@pytest.fixture
def root_client(root) -> Client:
    client = Client()
    client.force_login(root)
    return client


@pytest.fixture
def workspace(root, tmp_path) -> Collection:
    """An ordinary collection with one document, and one held in its quarantine."""
    collection = collection_create(name="Handbook", slug="handbook", user=root)
    (tmp_path / "install.md").write_text(INSTALL)
    (tmp_path / "notes.md").write_text(PLAIN_INJECTION.replace("Release notes", "Team notes"))
    collection_ingest(
        collection=collection,
        locations=[str(tmp_path / "install.md"), str(tmp_path / "notes.md")],
    )
    return collection


@pytest.fixture
def evaluated(tmp_path, workspace):
    """A finished evaluation run; its corpus's planted instruction is in the quarantine."""
    dataset = eval_dataset_write(tmp_path / "dataset")
    return eval_run_execute(run=eval_run_create(dataset_path=dataset, compare="fast", offline=True))


def _options(html: str, select_name: str) -> list[str]:
    select = re.search(rf'<select[^>]*name="{select_name}"[^>]*>(.*?)</select>', html, re.S)
    assert select is not None, f"no <select name={select_name}>"
    return re.findall(r'<option value="([^"]*)"', select.group(1))


def test_the_harness_builds_its_corpus_in_an_evaluation_collection(evaluated):
    collection = evaluated.collection
    assert collection.purpose == Collection.Purpose.EVALUATION
    assert collection.slug == f"eval-{EVAL_DATASET_NAME}"
    held = QuarantineItem.objects.get(collection=collection)
    assert held.source.location.endswith("release.md")


def test_evaluation_collections_are_not_listed_unless_staff_ask(root_client, evaluated):
    eval_url = reverse("collections:detail", args=[evaluated.collection.slug])
    page = root_client.get(reverse("collections:list")).content.decode()
    assert reverse("collections:detail", args=["handbook"]) in page
    assert eval_url not in page
    assert "Show evaluation collections" in page

    shown = root_client.get(reverse("collections:list") + "?evaluation=1").content.decode()
    assert eval_url in shown
    assert reverse("collections:detail", args=["handbook"]) in shown
    assert 'class="badge evaluation"' in shown
    assert "Hide evaluation collections" in shown


def test_the_ask_and_history_pickers_offer_only_workspace_collections(root_client, evaluated):
    ask = root_client.get(reverse("query:ask")).content.decode()
    assert _options(ask, "collection") == ["handbook"]
    history = root_client.get(reverse("query:history")).content.decode()
    assert _options(history, "collection") == ["", "handbook"]


def test_the_quarantine_queue_hides_evaluation_items_unless_asked_for(root_client, evaluated):
    page = root_client.get(reverse("collections:quarantine")).content.decode()
    assert "Team notes" in page or "notes.md" in page  # the workspace's own held document
    assert "release.md" not in page and "Release notes" not in page
    # The navigation's count is the workspace's: one item, not two.
    assert re.search(r'class="count"[^>]*>\s*1\s*<', page), page[:3000]

    shown = root_client.get(reverse("collections:quarantine") + "?evaluation=1").content.decode()
    assert "Release notes" in shown
    assert "belongs to an evaluation dataset" in shown
    # The tabs and the decision forms keep the toggle.
    assert "?status=all&amp;evaluation=1" in shown
    assert '<input type="hidden" name="evaluation" value="1">' in shown


def test_an_evaluation_item_is_decided_only_from_the_evaluation_view(root_client, evaluated):
    item = QuarantineItem.objects.get(collection=evaluated.collection)

    response = root_client.post(
        DECIDE, {"items": [item.pk], "decision": "reject", "reason": "planted"}, follow=True
    )
    assert "Nothing decided" in response.content.decode()
    item.refresh_from_db()
    assert item.review_status == QuarantineItem.ReviewStatus.PENDING

    response = root_client.post(
        DECIDE, {"items": [item.pk], "decision": "reject", "reason": "planted", "evaluation": "1"}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("collections:quarantine") + "?evaluation=1"
    item.refresh_from_db()
    assert item.review_status == QuarantineItem.ReviewStatus.REJECTED


def test_the_run_page_links_to_its_collection_and_held_sources(root_client, evaluated):
    page = root_client.get(reverse("eval:run", args=[evaluated.pk])).content.decode()
    detail = reverse("collections:detail", args=[evaluated.collection.slug])
    assert f'href="{detail}"' in page
    assert "?status=all&amp;evaluation=1" in page

    collection_page = root_client.get(detail)
    html = collection_page.content.decode()
    assert collection_page.status_code == 200
    assert "evaluation harness builds this collection" in html
    assert "Ask this collection" not in html


def test_people_who_are_not_staff_cannot_list_evaluation_collections(client, user, tmp_path):
    """Even a member of an evaluation collection sees it only by its address."""
    collection_create(name="Mine", slug="mine", user=user)
    collection_create(
        name="Evaluation: x", slug="eval-x", user=user, purpose=Collection.Purpose.EVALUATION
    )
    client.force_login(user)
    page = client.get(reverse("collections:list") + "?evaluation=1").content.decode()
    assert reverse("collections:detail", args=["mine"]) in page
    assert reverse("collections:detail", args=["eval-x"]) not in page
    assert "Show evaluation collections" not in page
    assert client.get(reverse("collections:detail", args=["eval-x"])).status_code == 200


def test_a_held_evaluation_document_links_to_the_evaluation_queue(root_client, evaluated):
    item = QuarantineItem.objects.get(collection=evaluated.collection)
    page = root_client.get(
        reverse("collections:source", args=[evaluated.collection.slug, item.source_id])
    ).content.decode()
    assert f"{reverse('collections:quarantine')}?evaluation=1#item-{item.pk}" in page
