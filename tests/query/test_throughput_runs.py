"""Runs stored off the request path: every answer given is stored, whatever happens.

Real PostgreSQL, the real pipeline, real threads and a real second process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.db.models import Value
from django.db.models.functions import Concat

from query_app.models import Conversation, QueryRun
from query_app.run_writer import RunWriter, run_store, run_writer
from query_app.services import QueryRequest, query_answer
from tests.support.factories import indexed_collection
from tests.support.knowledge_base import KB_DOCS, REFUND_QUESTION

pytestmark = pytest.mark.django_db(transaction=True)

QUESTIONS = [
    REFUND_QUESTION,
    "Who can I call for support?",
    "How long does shipping take?",
]


@pytest.fixture(autouse=True)
def _writer_connection_closed():
    """The test database can be dropped: no writer thread keeps a connection to it."""
    yield
    run_writer().disconnect()


@pytest.fixture
def shared_kb(reader):
    """The knowledge base, committed (the writer thread reads it on its own connection)."""
    return indexed_collection(KB_DOCS, slug="kb", members={reader: "read"})


def _unsaved_run(user, question: str) -> QueryRun:
    return query_answer(
        user=user, request=QueryRequest(collection="kb", question=question), store=False
    )


def _stored(run: QueryRun) -> QueryRun:
    return QueryRun.objects.select_related("conversation").get(pk=run.pk)


def test_answers_from_many_threads_are_all_stored_with_the_ids_they_were_given(shared_kb, reader):
    writer = run_writer()
    answered: list[QueryRun] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def ask(n: int) -> None:
        try:
            for i in range(3):
                run = query_answer(
                    user=reader,
                    request=QueryRequest(collection="kb", question=QUESTIONS[(n + i) % 3]),
                    store_later=True,
                )
                with lock:
                    answered.append(run)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()  # this thread's own

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert writer.flush(timeout=60)

    assert errors == []
    assert len({run.pk for run in answered}) == 18
    for run in answered:
        stored = _stored(run)
        assert stored.as_payload() == run.as_payload()
        # Each lone question of a signed-in user starts its own conversation.
        assert stored.conversation.owner == reader
        assert stored.conversation.updated_at == stored.created_at
    assert QueryRun.objects.count() == 18
    assert Conversation.objects.count() == 18


def test_a_full_queue_makes_the_caller_write_its_run_itself(shared_kb, reader):
    writer = RunWriter(capacity=2, autostart=False)  # holds runs until started
    runs = [_unsaved_run(reader, q) for q in [*QUESTIONS, *QUESTIONS]]

    for run in runs:
        run_store(run, conversation=None, later=True, writer=writer)
    written_by_callers = set(QueryRun.objects.values_list("pk", flat=True))
    writer.start()
    assert writer.flush(timeout=60)
    writer.stop()

    assert len(written_by_callers) == 4  # the two in the queue wait for the thread
    assert writer.written_now == 4 and writer.written == 2
    assert set(QueryRun.objects.values_list("pk", flat=True)) == {run.pk for run in runs}


def test_every_field_of_a_run_written_later_is_stored_as_given(shared_kb, reader):
    # The writer thread inserts with COPY: each column must come back as the run held it.
    runs = [_unsaved_run(reader, q) for q in QUESTIONS]
    runs[0].groundedness = {"supported": 2, "sentences": [{"text": "é \\ \t 'x'", "ok": True}]}
    runs[1].groundedness = None
    runs[1].error = "line one\nline two\ttab \\N"  # COPY's own escapes, as text
    runs[2].user = None  # an anonymous run: no conversation
    expressed = _unsaved_run(reader, QUESTIONS[0])
    expressed.error = Concat(Value("computed "), Value("by the server"))  # not COPY's to take
    writer = RunWriter(autostart=False)
    for run in runs:
        run_store(run, conversation=None, later=True, writer=writer)
    writer.start()
    assert writer.flush(timeout=60)
    run_store(expressed, conversation=None, later=True, writer=writer)
    assert writer.flush(timeout=60)
    writer.stop()

    assert writer.written == 4
    assert QueryRun.objects.get(pk=expressed.pk).error == "computed by the server"
    for run in runs:
        stored = QueryRun.objects.get(pk=run.pk)
        for field in QueryRun._meta.concrete_fields:
            assert getattr(stored, field.attname) == getattr(run, field.attname), field.name
    assert runs[2].conversation_id is None
    assert Conversation.objects.filter(pk=runs[0].conversation_id, owner=reader).exists()


def test_a_run_that_cannot_be_stored_does_not_take_the_others_with_it(
    shared_kb, reader, django_user_model, caplog
):
    from collections_app.models import Collection

    doomed = indexed_collection(
        ["Refunds of the doomed shop take 3 days."], slug="doomed", members={reader: "read"}
    )
    writer = RunWriter(autostart=False)
    runs = [_unsaved_run(reader, q) for q in QUESTIONS]
    lost = query_answer(
        user=reader,
        request=QueryRequest(collection="doomed", question=REFUND_QUESTION),
        store=False,
    )
    for run in [runs[0], lost, *runs[1:]]:
        run_store(run, conversation=None, later=True, writer=writer)
    Collection.objects.filter(pk=doomed.pk).delete()  # deleted while its run waits

    writer.start()
    assert writer.flush(timeout=60)
    writer.stop()

    assert set(QueryRun.objects.values_list("pk", flat=True)) == {run.pk for run in runs}
    assert writer.failed == 1
    assert f"run {lost.pk} could not be stored" in caplog.text


def test_a_follow_up_stored_later_joins_its_conversation(shared_kb, reader):
    first = query_answer(
        user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION)
    )
    follow = query_answer(
        user=reader,
        request=QueryRequest(
            collection="kb", question="And for shipping?", conversation=first.conversation_id
        ),
        store_later=True,
    )
    assert run_writer().flush(timeout=60)

    conversation = Conversation.objects.get(pk=first.conversation_id)
    assert list(conversation.turns.order_by("created_at")) == [first, _stored(follow)]
    assert conversation.updated_at == _stored(follow).created_at


def test_the_api_run_page_finds_a_run_just_answered(shared_kb, reader):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(reader)
    asked = client.post("/api/collections/kb/query", {"question": REFUND_QUESTION}, format="json")
    shown = client.get(f"/api/query-runs/{asked.json()['id']}")

    assert asked.status_code == 200 and shown.status_code == 200
    assert shown.json()["answer"] == asked.json()["answer"]
    assert shown.json()["created_at"] == asked.json()["created_at"]


def test_runs_still_queued_when_a_process_exits_are_written(shared_kb, reader):
    """A real process answers with ``store_later`` and exits at once: nothing is lost."""
    script = f"""
import django, json
django.setup()
from django.contrib.auth import get_user_model
from query_app.run_writer import run_writer
from query_app.services import QueryRequest, query_answer
run_writer().autostart = False  # nothing is written before the process exits
user = get_user_model().objects.get(pk={reader.pk})
ids = [
    query_answer(user=user, request=QueryRequest(collection="kb", question=q), store_later=True).pk
    for q in {QUESTIONS!r}
]
print(json.dumps({{"ids": ids, "pending": run_writer().pending()}}))
"""
    env = {
        **os.environ,
        "RAGSITE_DB_NAME": settings.DATABASES["default"]["NAME"],
        "DJANGO_SETTINGS_MODULE": "ragsite.settings",
        "RAG_WARMUP": "0",
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(settings.BASE_DIR),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["pending"] == 3  # all three were still queued at exit
    stored = QueryRun.objects.filter(pk__in=result["ids"])
    assert sorted(stored.values_list("question", flat=True)) == sorted(QUESTIONS)


def test_a_caller_inside_a_transaction_stores_its_run_in_it(shared_kb, reader):
    from django.db import transaction

    with transaction.atomic():
        run = query_answer(
            user=reader,
            request=QueryRequest(collection="kb", question=REFUND_QUESTION),
            store_later=True,
        )
        # Seen at once in the caller's transaction; the writer thread never had it.
        assert _stored(run).answer == run.answer
        assert not run_writer().holds(run.pk)
