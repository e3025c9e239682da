"""The model settings page: administrators only, write-only key, env precedence, test, detection.

The chat server is ``ScriptedChatServer``, a real OpenAI-compatible HTTP server
on 127.0.0.1 (no chat model can run here); it also lists models at
``/v1/models`` and ``/api/tags`` as llama.cpp and Ollama do.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client

from query_app.models import ModelSettings, QueryRun
from tests.support.chat_server import Reply, completion
from tests.support.clients import token_client
from tests.support.factories import indexed_collection
from tests.support.tiny_models import build_tiny_cross_encoder

URL = "/settings/models/"
SECRET = "sk-page-7d41e09b2c"
QUESTION = "How much free disk space does the installer need?"


@pytest.fixture
def root(django_user_model):
    return django_user_model.objects.create_superuser(username="root", password="pw-root")


@pytest.fixture
def admin(db, root) -> Client:
    client = Client()
    client.force_login(root)
    return client


@pytest.fixture
def no_environment(rag_set):
    """None of the RAG_CHAT_* / RAG_RERANK_MODEL variables is set."""
    rag_set("chat.base_url", "")
    rag_set("chat.model", "")
    rag_set("chat.api_key", "")
    rag_set("query.rerank.model", "")
    return rag_set


def form_data(**values: str) -> dict[str, str]:
    data = {"chat_base_url": "", "chat_model": "", "chat_api_key": "", "rerank_model": ""}
    return data | {"action": "save"} | values


def text_of(response) -> str:  # type: ignore[no-untyped-def]
    return response.content.decode()


def field_value(html: str, name: str) -> str | None:
    tag = re.search(rf'<input[^>]*name="{name}"[^>]*>', html)
    assert tag, f"no input {name}"
    value = re.search(r'value="([^"]*)"', tag.group(0))
    return value.group(1) if value else None


# --- who may see it ---------------------------------------------------------------------------


def test_only_superusers_get_the_page_and_the_link(admin, alice, django_user_model, no_environment):
    page = admin.get(URL)
    assert page.status_code == 200
    assert 'href="/settings/models/" aria-current="page">Models</a>' in text_of(page)

    home = alice.get("/collections/")
    assert "/settings/models/" not in text_of(home)
    denied = alice.get(URL)
    assert denied.status_code == 403
    assert "Only administrators" in text_of(denied)
    assert alice.post(URL, form_data(chat_base_url="http://evil.test/v1")).status_code == 403

    staff = django_user_model.objects.create_user(username="staff", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    assert client.get(URL).status_code == 403
    assert not ModelSettings.objects.exists()

    anonymous = Client().get(URL)
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith("/accounts/login/")


# --- saving, and the key never shown -----------------------------------------------------------


def test_saving_applies_to_the_next_answer_and_the_key_is_never_shown_again(
    admin, alice, user, no_environment, chat_server
):
    indexed_collection(
        [
            "The installer needs 2 GB of free disk space and 4 GB of memory.",
            "Refunds are possible within 30 days of purchase.",
        ],
        slug="handbook",
        members={user: "admin"},
    )
    chat_server.responder = lambda request: completion("The installer needs 2 GB of free disk [1].")
    before = alice.post("/ask/", {"collection": "handbook", "question": QUESTION})
    assert QueryRun.objects.get().mode == "extractive"
    assert "Extractive" in text_of(before)

    response = admin.post(
        URL,
        form_data(
            chat_base_url=chat_server.base_url, chat_model="saved-model", chat_api_key=SECRET
        ),
        follow=True,
    )
    page = text_of(response)
    assert "Model settings saved. The next answer uses them." in page
    assert "written by <strong>saved-model</strong>" in page
    assert "A key is saved" in page
    assert field_value(page, "chat_api_key") is None
    assert SECRET not in page

    after = alice.post("/ask/", {"collection": "handbook", "question": QUESTION})
    run = QueryRun.objects.latest("id")
    assert run.mode == "llm"
    assert run.answer == "The installer needs 2 GB of free disk [1]."
    assert chat_server.headers[-1]["Authorization"] == f"Bearer {SECRET}"

    api = token_client(user)
    seen = [
        text_of(after),
        text_of(alice.get(f"/history/{run.pk}/")),
        text_of(alice.get("/history/")),
        text_of(api.post("/api/collections/handbook/query", {"question": QUESTION}, format="json")),
        text_of(api.get(f"/api/query-runs/{run.pk}")),
        text_of(api.get("/api/query-runs")),
        text_of(admin.get(URL)),
        text_of(admin.get("/admin/", follow=True)),
    ]
    assert len(chat_server.requests) == 2
    for html in seen:
        assert SECRET not in html
    assert SECRET not in ModelSettings.objects.get().chat_api_key_encrypted


def test_a_rejected_form_does_not_echo_the_typed_key(admin, no_environment):
    response = admin.post(
        URL, form_data(chat_base_url="localhost:11434", chat_model="m", chat_api_key=SECRET)
    )
    assert response.status_code == 400
    page = text_of(response)
    assert "Enter the server&#x27;s API root as an http:// or https:// address" in page
    assert SECRET not in page
    assert field_value(page, "chat_base_url") == "localhost:11434"
    assert not ModelSettings.objects.exists()


def test_the_key_can_be_kept_replaced_or_removed(admin, no_environment, chat_server):
    base = {"chat_base_url": chat_server.base_url, "chat_model": "m"}
    admin.post(URL, form_data(**base, chat_api_key=SECRET))
    stored = ModelSettings.objects.get().chat_api_key_encrypted
    admin.post(URL, form_data(**base))  # left empty: kept
    assert ModelSettings.objects.get().chat_api_key_encrypted == stored

    both = admin.post(URL, form_data(**base, chat_api_key="sk-2", clear_chat_api_key="on"))
    assert both.status_code == 400
    assert "Either enter a new API key or clear the saved one, not both." in text_of(both)

    page = text_of(admin.post(URL, form_data(**base, clear_chat_api_key="on"), follow=True))
    assert ModelSettings.objects.get().chat_api_key_encrypted == ""
    assert "Remove the saved API key" not in page
    assert "Only if the server asks for one" in page


def test_model_and_cross_encoder_problems_are_explained_on_the_page(
    admin, no_environment, tmp_path
):
    missing_model = admin.post(URL, form_data(chat_base_url="http://127.0.0.1:11434/v1"))
    assert missing_model.status_code == 400
    assert "Enter the model to use on this server" in text_of(missing_model)

    (tmp_path / "empty").mkdir()
    for value, message in [
        (str(tmp_path / "nowhere"), "There is no directory"),
        (str(tmp_path / "empty"), "holds no model"),
        ("models/../../etc/passwd", "absolute path"),
    ]:
        response = admin.post(URL, form_data(rerank_model=value))
        assert response.status_code == 400
        assert message in text_of(response)
    assert not ModelSettings.objects.exists()


# --- the environment wins -----------------------------------------------------------------------


def test_a_field_set_by_its_environment_variable_is_locked_and_says_so(
    admin, no_environment, chat_server
):
    admin.post(URL, form_data(chat_base_url=chat_server.base_url, chat_model="saved-model"))
    no_environment("chat.model", "env-model")
    no_environment("chat.api_key", "sk-env-secret-99")
    page = text_of(admin.get(URL))
    assert 'data-env="RAG_CHAT_MODEL"' in page
    assert 'data-env="RAG_CHAT_API_KEY"' in page
    assert 'data-env="RAG_CHAT_BASE_URL"' not in page
    assert re.search(r'<input[^>]*name="chat_model"[^>]*disabled', page)
    assert field_value(page, "chat_model") == "env-model"
    assert "written by <strong>env-model</strong>" in page
    assert "sk-env-secret-99" not in page

    # A submitted value for a locked field is ignored; the saved one stays.
    admin.post(URL, form_data(chat_base_url=chat_server.base_url, chat_model="typed-model"))
    assert ModelSettings.objects.get().chat_model == "saved-model"


# --- test connection --------------------------------------------------------------------------


def test_test_connection_shows_the_reply_without_saving(admin, no_environment, chat_server):
    chat_server.script(completion("pong"))
    response = admin.post(
        URL,
        form_data(action="test", chat_base_url=chat_server.base_url, chat_model="tiny"),
        HTTP_HX_REQUEST="true",
    )
    fragment = text_of(response)
    assert fragment.lstrip().startswith('<div id="test-result"')
    assert 'data-test-result="ok"' in fragment
    assert "tiny answered: pong" in fragment
    assert not ModelSettings.objects.exists()


def test_test_connection_uses_the_saved_key_and_reports_a_refusal(
    admin, no_environment, chat_server
):
    admin.post(
        URL, form_data(chat_base_url=chat_server.base_url, chat_model="m", chat_api_key=SECRET)
    )
    chat_server.script(Reply(status=401, json_body={"error": "invalid api key"}))
    # Without JavaScript the whole page comes back with the result.
    page = text_of(
        admin.post(
            URL, form_data(action="test", chat_base_url=chat_server.base_url, chat_model="m")
        )
    )
    assert 'data-test-result="failed"' in page
    assert "refused the request (HTTP 401)" in page
    assert chat_server.headers[-1]["Authorization"] == f"Bearer {SECRET}"
    assert SECRET not in page


def test_test_connection_with_a_bad_address_says_what_is_wrong(admin, no_environment):
    fragment = text_of(
        admin.post(
            URL,
            form_data(action="test", chat_base_url="127.0.0.1:11434", chat_model="m"),
            HTTP_HX_REQUEST="true",
        )
    )
    assert 'data-test-result="failed"' in fragment
    assert "http:// or https://" in fragment


# --- local servers --------------------------------------------------------------------------------


def test_a_local_server_is_offered_and_fills_in_the_form(
    admin, no_environment, chat_server, rag_set
):
    root = chat_server.base_url.removesuffix("/v1")
    chat_server.models = ["llama3.2:1b"]
    rag_set("chat.local_servers", [{"kind": "ollama", "url": root}])
    page = text_of(admin.get(URL))
    assert 'hx-trigger="load"' in page  # the page does not wait for the probes

    fragment = text_of(admin.get(f"{URL}?detect=1", HTTP_HX_REQUEST="true"))
    assert "<strong>Ollama</strong>" in fragment
    link = re.search(r'href="([^"]+)">Use llama3.2:1b</a>', fragment)
    assert link
    filled = text_of(admin.get(link.group(1).replace("&amp;", "&")))
    assert field_value(filled, "chat_base_url") == f"{root}/v1"
    assert field_value(filled, "chat_model") == "llama3.2:1b"
    assert "save to use it" in filled
    assert not ModelSettings.objects.exists()


def test_no_local_server_says_so(admin, no_environment, rag_set):
    rag_set("chat.local_servers", [{"kind": "llama.cpp", "url": "http://127.0.0.1:9"}])
    fragment = text_of(admin.get(f"{URL}?detect=1", HTTP_HX_REQUEST="true"))
    assert "No Ollama (127.0.0.1:11434) or llama.cpp server (127.0.0.1:8080) answers" in fragment


def test_a_fill_in_link_naming_a_remote_server_is_ignored(admin, no_environment):
    page = text_of(admin.get(f"{URL}?use_base_url=http://attacker.example/v1&use_model=x"))
    assert field_value(page, "chat_base_url") in (None, "")
    assert "Filled in from the server found on this machine" not in page


def test_the_profile_pickers_follow_a_saved_cross_encoder_without_a_restart(
    admin, no_environment, tmp_path
):
    """The pickers' notes are kept per process, and a save shows at the next page."""
    indexed_collection(["Refunds are possible within 30 days."], slug="handbook")
    skipped = "balanced — hybrid search; cross-encoder reranker not configured, skipped"
    runs = "balanced — hybrid search, cross-encoder reranking"
    assert skipped in text_of(admin.get("/ask/?collection=handbook"))
    assert skipped in text_of(admin.get("/ask/?collection=handbook"))  # kept, same answer

    model = build_tiny_cross_encoder(tmp_path / "ce", texts=["refunds"])
    saved = admin.post(URL, form_data(rerank_model=str(model)), follow=True)
    assert "Model settings saved" in text_of(saved)

    page = text_of(admin.get("/ask/?collection=handbook"))
    assert runs in page and skipped not in page
    answer = admin.post(
        "/ask/",
        {"collection": "handbook", "question": "Can I get a refund?", "profile": "balanced"},
        HTTP_HX_REQUEST="true",
    )
    # The answer partial's re-run picker says the same.
    assert runs in text_of(answer)
