"""``manage.py rag query|retrieve``: answers, sources and trace on the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from collections_app.services import collection_create, collection_ingest
from query_app.models import QueryRun
from tests.support.documents import INSTALL, REFUNDS
from tests.support.processes import free_port

QUESTION = "What does error ERR-4471 from the installer mean?"

# Answers are extractive: no chat endpoint is configured.
pytestmark = pytest.mark.usefixtures("no_chat_model")


@pytest.fixture
def docs(collection, tmp_path):
    (tmp_path / "install.md").write_text(INSTALL)
    (tmp_path / "refunds.md").write_text(REFUNDS)
    report = collection_ingest(collection=collection, locations=[str(tmp_path / "*.md")])
    assert report.as_dict()["sources_ingested"] == 2
    return collection


def rag(*args: str) -> str:
    out = StringIO()
    call_command("rag", *args, stdout=out)
    return out.getvalue()


def test_json_output_has_answer_citations_and_trace(docs):
    payload = json.loads(rag("query", "--collection", "docs", "--json", QUESTION))
    assert "ERR-4471" in payload["answer"] and "[1]" in payload["answer"]
    first = payload["citations"][0]
    for key in ("marker", "chunk_id", "source", "snippet", "score", "char_start", "char_end"):
        assert key in first, key
    assert "page" in first
    assert first["marker"] == 1 and first["source"].endswith("install.md")
    assert docs.chunks.filter(pk=first["chunk_id"]).exists()
    stages = {step["stage"]: step for step in payload["trace"]}
    assert {"retrieve", "generate"} <= set(stages)
    for step in payload["trace"]:
        assert isinstance(step["duration_ms"], int | float)
        assert isinstance(step["details"], dict)


def test_human_output_is_answer_then_sources_then_one_line_per_stage(docs):
    text = rag("query", "--collection", "docs", "--top-n", "2", QUESTION)
    answer, sources_at, trace_at = (
        text.index("ERR-4471"),
        text.index("Sources:"),
        text.index("Trace:"),
    )
    assert answer < sources_at < trace_at
    assert "[1] " in text[sources_at:trace_at]
    trace_lines = [line for line in text[trace_at:].splitlines()[1:] if line.startswith("  ")]
    stage_lines = [
        line for line in trace_lines if not line.lstrip().startswith(("total", "warning"))
    ]
    payload = json.loads(rag("query", "--collection", "docs", "--top-n", "2", "--json", QUESTION))
    assert [line.split()[0] for line in stage_lines] == [s["stage"] for s in payload["trace"]]


def test_retrieve_lists_passages_and_skips_generation(docs):
    payload = json.loads(rag("retrieve", "--collection", "docs", "--json", "refunds", "within"))
    assert payload["question"] == "refunds within"
    assert payload["mode"] == "retrieval-only"
    assert payload["citations"][0]["source"].endswith("refunds.md")
    generate = next(step for step in payload["trace"] if step["stage"] == "generate")
    assert generate["skipped"] is True


def test_runs_are_stored_under_the_named_user(docs, user):
    payload = json.loads(
        rag("query", "--collection", "docs", "--user", "alice", "--json", QUESTION)
    )
    run = QueryRun.objects.get(pk=payload["id"])
    assert run.user == user and run.answer == payload["answer"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--profile", "turbo", QUESTION], "known profiles"),
        (["--top-n", "0", QUESTION], "top_n must be between"),
        (["   "], "the question is empty"),
        (["--option", "rerank.kind=magic", QUESTION], "cross-encoder"),
        (["--option", "nonsense", QUESTION], "KEY=VALUE"),
        (
            ["--profile", "balanced", "--option", "rerank.required=true", QUESTION],
            "RAG_RERANK_MODEL",
        ),
        (["--user", "nobody", QUESTION], "no user named"),
    ],
    ids=[
        "unknown-profile",
        "top-n",
        "empty",
        "unknown-reranker",
        "bad-option",
        "no-cross-encoder",
        "unknown-user",
    ],
)
def test_bad_input_exits_2_with_a_one_line_reason(docs, args, expected):
    with pytest.raises(CommandError) as excinfo:
        rag("query", "--collection", "docs", *args)
    assert excinfo.value.returncode == 2
    assert expected in str(excinfo.value)
    assert "\n" not in str(excinfo.value)


def test_collection_the_user_may_not_read_looks_missing(docs, other_user):
    for slug, user in (("nope", "alice"), ("docs", "bob")):
        with pytest.raises(CommandError) as excinfo:
            rag("retrieve", "--collection", slug, "--user", user, QUESTION)
        assert excinfo.value.returncode == 2
        assert str(excinfo.value) == f"no collection {slug!r}"


def test_chat_model_down_without_fallback_exits_1(docs, settings):
    port = free_port()
    settings.RAG = {
        **settings.RAG,
        "chat": {"base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "max_retries": 0},
    }
    with pytest.raises(CommandError) as excinfo:
        rag("query", "--collection", "docs", "--no-fallback", QUESTION)
    assert excinfo.value.returncode == 1
    assert "chat model" in str(excinfo.value)


@pytest.mark.django_db(transaction=True)
def test_a_real_process_exits_2_and_prints_one_line(user):
    collection_create(name="Docs", slug="docs", user=user)
    env = {**os.environ, "RAGSITE_DB_NAME": settings.DATABASES["default"]["NAME"]}
    done = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "rag",
            "query",
            "--collection",
            "docs",
            "--profile",
            "x",
            "hi",
        ],
        cwd=Path(settings.BASE_DIR),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = [line for line in done.stderr.splitlines() if line.strip()]
    assert "unknown profile 'x'" in line and "fast" in line


def test_runs_without_a_named_user_are_stored_without_an_owner(docs):
    before = QueryRun.objects.count()
    out = StringIO()
    call_command("rag", "query", "--collection", docs.slug, "--json", QUESTION, stdout=out)
    payload = json.loads(out.getvalue())
    run = QueryRun.objects.get(pk=payload["id"])
    assert QueryRun.objects.count() == before + 1
    assert run.user is None
    assert run.question == QUESTION
