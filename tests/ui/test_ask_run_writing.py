"""The ask page's answer is written off the request path (query_app/run_writer.py).

Outside a transaction, as on a served site, the page answers with the run's id and
permalink at once and the writer thread stores the row moments later; reading the
run by id waits for it. The other page tests run inside a transaction, where the
run is written in the request.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client

from collections_app.services import collection_create
from query_app.models import QueryRun
from query_app.run_writer import run_writer
from tests.support.factories import chunks_add


@pytest.mark.django_db(transaction=True)
def test_an_answer_outside_a_transaction_is_stored_and_its_permalink_works(user):
    collection = collection_create(name="Manual", slug="manual", user=user)
    chunks_add(collection, ["Backups are kept for 30 days on the vault server."])
    client = Client()
    client.force_login(user)

    response = client.post(
        "/ask/",
        {"collection": "manual", "profile": "fast", "question": "How long are backups kept?"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "30 days" in html
    run_id = int(re.search(r'href="/history/(\d+)/"', html).group(1))  # type: ignore[union-attr]

    # The permalink waits for this process's writer, then shows the stored run.
    page = client.get(f"/history/{run_id}/")
    assert page.status_code == 200 and "30 days" in page.content.decode()
    assert run_writer().flush(10.0)
    run = QueryRun.objects.get(pk=run_id)
    assert run.user == user and run.conversation is not None
    assert "30 days" in run.answer
