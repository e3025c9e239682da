"""Model settings saved in the database: encryption, precedence, no restart, connection tests.

No chat model can run here: the chat server is ``ScriptedChatServer``, a real
OpenAI-compatible HTTP server on 127.0.0.1 (it also lists models as llama.cpp
and Ollama do, for the local-server detection).
"""

from __future__ import annotations

import logging
import time

import pytest
from django.db.models import F

from query_app.chat import ChatConfig
from query_app.model_settings import (
    REFRESH_S,
    ModelSettingInvalid,
    ModelSettingsChange,
    NotAnAdministrator,
    chat_connection_test,
    local_chat_servers_detect,
    model_setting_resolve,
    model_settings_save,
    rerank_model_validate,
)
from query_app.models import ModelSettings
from query_app.services import QueryRequest, profile_resolve, query_answer
from tests.support.chat_server import Reply, completion
from tests.support.knowledge_base import KB_DOCS, REFUND_QUESTION, step
from tests.support.processes import free_port
from tests.support.tiny_models import build_tiny_cross_encoder

SECRET = "sk-test-3f9a1c7e5b"


@pytest.fixture
def admin(django_user_model):
    return django_user_model.objects.create_superuser(username="root", password="pw-root")


@pytest.fixture
def no_environment(rag_set):
    """None of RAG_CHAT_BASE_URL, RAG_CHAT_MODEL, RAG_CHAT_API_KEY, RAG_RERANK_MODEL is set."""
    rag_set("chat.base_url", "")
    rag_set("chat.model", "")
    rag_set("chat.api_key", "")
    rag_set("query.rerank.model", "")
    return rag_set


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    texts = [REFUND_QUESTION, *[chunk for doc in KB_DOCS for chunk in doc.chunks]]
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"), texts=texts)


def save(admin, **fields) -> None:
    model_settings_save(user=admin, change=ModelSettingsChange(**fields))


# --- storage ----------------------------------------------------------------------------


def test_the_api_key_is_stored_encrypted_and_read_back_only_by_the_chat_client(
    db, admin, no_environment, chat_server
):
    save(admin, chat_base_url=chat_server.base_url, chat_model="saved-model", chat_api_key=SECRET)
    row = ModelSettings.objects.get()
    assert row.chat_api_key_encrypted
    assert SECRET not in row.chat_api_key_encrypted
    assert SECRET.encode() not in bytes(repr(ModelSettings.objects.values().get()), "utf-8")
    config = ChatConfig.from_settings()
    assert config is not None
    assert (config.base_url, config.model, config.api_key) == (
        chat_server.base_url,
        "saved-model",
        SECRET,
    )


def test_a_key_saved_under_another_secret_key_is_reported_not_sent(
    db, admin, no_environment, settings, chat_server
):
    save(admin, chat_base_url=chat_server.base_url, chat_model="saved-model", chat_api_key=SECRET)
    settings.SECRET_KEY = "a-different-secret-key-after-a-rotation"
    key = model_setting_resolve("chat_api_key")
    assert key.value == ""
    assert "cannot be decrypted" in key.problem
    assert "enter the key again" in key.problem


def test_saving_a_new_key_replaces_it_and_clearing_removes_it(db, admin, no_environment):
    save(admin, chat_base_url="http://127.0.0.1:9/v1", chat_model="m", chat_api_key=SECRET)
    save(admin, chat_base_url="http://127.0.0.1:9/v1", chat_model="m")  # no key: kept
    assert model_setting_resolve("chat_api_key").value == SECRET
    save(admin, chat_api_key="sk-new-key-42")
    assert model_setting_resolve("chat_api_key").value == "sk-new-key-42"
    save(admin, clear_chat_api_key=True)
    assert model_setting_resolve("chat_api_key").source == "unset"
    assert ModelSettings.objects.get().chat_api_key_encrypted == ""
    with pytest.raises(ModelSettingInvalid, match="not both"):
        save(admin, chat_api_key="sk-x", clear_chat_api_key=True)


def test_only_superusers_may_save(db, user, no_environment):
    with pytest.raises(NotAnAdministrator):
        save(user, chat_base_url="http://127.0.0.1:9/v1", chat_model="m")
    assert not ModelSettings.objects.exists()


def test_a_chat_server_needs_both_an_address_and_a_model(db, admin, no_environment):
    with pytest.raises(ModelSettingInvalid, match="Enter the model") as err:
        save(admin, chat_base_url="http://127.0.0.1:9/v1", chat_model="")
    assert err.value.field == "chat_model"
    with pytest.raises(ModelSettingInvalid, match="base URL") as err:
        save(admin, chat_base_url="", chat_model="llama3.2")
    assert err.value.field == "chat_base_url"
    # The environment may provide the other half.
    no_environment("chat.base_url", "http://127.0.0.1:9/v1")
    save(admin, chat_base_url="", chat_model="llama3.2")
    assert ChatConfig.from_settings() is not None


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("127.0.0.1:11434", "http:// or https://"),
        ("ftp://models.example/v1", "http:// or https://"),
        ("http://127.0.0.1:11434/v1?x=1", "without ?query"),
        ("http://127.0.0.1:11434/v1/chat/completions", "http://127.0.0.1:11434/v1"),
    ],
)
def test_a_bad_base_url_is_explained(db, admin, no_environment, url, message):
    with pytest.raises(ModelSettingInvalid) as err:
        save(admin, chat_base_url=url, chat_model="m")
    assert message in str(err.value)
    assert err.value.field == "chat_base_url"


# --- the cross-encoder path ---------------------------------------------------------------


def test_a_cross_encoder_directory_is_accepted_and_anything_else_explained(tmp_path, tiny_model):
    assert rerank_model_validate(f"  {tiny_model}  ") == str(tiny_model)
    (tmp_path / "weights.bin").write_text("x")
    cases = {
        str(tmp_path / "missing"): "There is no directory",
        str(tmp_path / "weights.bin"): "is a file",
        str(tmp_path): "holds no model",
        "./models/ce": "absolute path",
        "cross-encoder/../../etc": "absolute path",
        "not a model id!": "model id such as",
        "nobody-has/this-model-cached": "not in this machine's Hugging Face cache",
    }
    for value, message in cases.items():
        with pytest.raises(ModelSettingInvalid, match=message) as err:
            rerank_model_validate(value)
        assert err.value.field == "rerank_model"


def test_the_saved_cross_encoder_reranks_the_next_answer(
    kb, reader, admin, no_environment, tiny_model
):
    _, before = profile_resolve(profile="balanced")
    assert before.rerank.model == ""
    save(admin, rerank_model=str(tiny_model))
    run = query_answer(
        user=reader,
        request=QueryRequest(collection="kb", question=REFUND_QUESTION, profile="balanced"),
    )
    rerank = step(run, "rerank")["details"]
    assert (rerank["reranker"], rerank["model"]) == ("cross-encoder", str(tiny_model))
    assert not rerank.get("skipped")
    assert run.options["rerank"]["model"] == str(tiny_model)


def test_rag_rerank_model_wins_over_the_saved_one(kb, reader, admin, no_environment, tiny_model):
    save(admin, rerank_model=str(tiny_model))
    no_environment("query.rerank.model", "/opt/models/from-the-environment")
    assert model_setting_resolve("rerank_model").source == "environment"
    _, options = profile_resolve(profile="balanced")
    assert options.rerank.model == "/opt/models/from-the-environment"


# --- precedence and freshness ---------------------------------------------------------------


def test_each_environment_variable_wins_for_its_own_field(db, admin, no_environment, chat_server):
    save(admin, chat_base_url=chat_server.base_url, chat_model="saved-model", chat_api_key=SECRET)
    no_environment("chat.model", "env-model")
    config = ChatConfig.from_settings()
    assert config is not None
    assert (config.base_url, config.model, config.api_key) == (
        chat_server.base_url,
        "env-model",
        SECRET,
    )
    assert model_setting_resolve("chat_model").env_var == "RAG_CHAT_MODEL"
    assert model_setting_resolve("chat_model").from_environment
    assert model_setting_resolve("chat_base_url").source == "saved"
    no_environment("chat.api_key", "sk-from-env")
    config = ChatConfig.from_settings()
    assert config is not None
    assert config.api_key == "sk-from-env"


def test_a_saved_chat_server_answers_the_next_question_without_a_restart(
    kb, reader, admin, no_environment, chat_server
):
    chat_server.responder = lambda request: completion("Refunds are possible for 30 days [1].")
    first = query_answer(
        user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION)
    )
    assert first.mode == "extractive"
    assert chat_server.requests == []

    save(admin, chat_base_url=chat_server.base_url, chat_model="saved-model", chat_api_key=SECRET)
    second = query_answer(
        user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION)
    )
    assert second.mode == "llm"
    assert second.answer == "Refunds are possible for 30 days [1]."
    assert [r["model"] for r in chat_server.requests] == ["saved-model"]
    assert chat_server.headers[0]["Authorization"] == f"Bearer {SECRET}"
    assert SECRET not in str(second.as_payload())

    save(admin, chat_base_url="", chat_model="")
    third = query_answer(
        user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION)
    )
    assert third.mode == "extractive"
    assert len(chat_server.requests) == 1


def test_a_change_saved_by_another_process_is_seen_within_the_refresh_interval(
    db, admin, no_environment
):
    save(admin, chat_base_url="http://127.0.0.1:9/v1", chat_model="first-model")
    assert model_setting_resolve("chat_model").value == "first-model"
    # Another process (a second web worker) saves: only the row changes here.
    ModelSettings.objects.update(chat_model="second-model", version=F("version") + 1)
    assert model_setting_resolve("chat_model").value == "first-model"
    time.sleep(REFRESH_S + 0.2)
    assert model_setting_resolve("chat_model").value == "second-model"


# --- test connection ------------------------------------------------------------------------


def test_test_connection_shows_the_models_reply(db, chat_server):
    chat_server.script(completion("pong"))
    result = chat_connection_test(base_url=chat_server.base_url, model="tiny", api_key=SECRET)
    assert result.ok
    assert result.reply == "pong"
    assert result.message == "tiny answered: pong"
    (request,) = chat_server.requests
    assert request["model"] == "tiny"
    assert request["max_tokens"] == 16
    assert chat_server.headers[0]["Authorization"] == f"Bearer {SECRET}"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply(status=401, json_body={"error": "invalid key"}), "HTTP 401"),
        (Reply(status=403, json_body={"error": "forbidden"}), "the API key is missing, wrong"),
        (Reply(raw=b"<html>It works!</html>"), "not with an OpenAI-compatible chat completion"),
        (Reply(json_body={"unexpected": True}), "not with an OpenAI-compatible chat completion"),
        (Reply(status=500, json_body={"error": "model crashed"}), "model crashed"),
    ],
)
def test_test_connection_explains_each_failure(db, chat_server, reply, expected):
    chat_server.script(reply)
    result = chat_connection_test(base_url=chat_server.base_url, model="tiny", api_key="")
    assert not result.ok
    assert expected in result.message
    assert len(chat_server.requests) == 1  # no retries while a person waits


def test_test_connection_reports_a_timeout(db, chat_server):
    chat_server.script(Reply(delay_s=1.5, json_body={}))
    result = chat_connection_test(
        base_url=chat_server.base_url, model="tiny", api_key="", timeout_s=0.3
    )
    assert not result.ok
    assert "No answer from" in result.message
    assert "within 0.3 seconds" in result.message


def test_test_connection_reports_a_refused_connection(db):
    url = f"http://127.0.0.1:{free_port()}/v1"
    result = chat_connection_test(base_url=url, model="tiny", api_key="")
    assert not result.ok
    assert result.message == f"Connection refused by {url}: is the server running and on this port?"


def test_test_connection_points_at_a_base_url_without_v1(db, chat_server):
    root = chat_server.base_url.removesuffix("/v1")
    result = chat_connection_test(base_url=root, model="tiny", api_key="")
    assert not result.ok
    assert "HTTP 404" in result.message
    assert "usually ends in /v1" in result.message


def test_test_connection_needs_an_address_and_a_model(db):
    assert (
        "Enter a base URL and a model"
        in chat_connection_test(base_url="", model="", api_key="").message
    )
    assert (
        "http:// or https://"
        in chat_connection_test(base_url="localhost:8080", model="m", api_key="").message
    )


# --- local servers --------------------------------------------------------------------------


def test_local_llama_cpp_and_ollama_servers_are_found_with_their_models(chat_server):
    chat_server.models = ["qwen2.5-0.5b-instruct", "llama3.2:1b"]
    root = chat_server.base_url.removesuffix("/v1")
    nothing = f"http://127.0.0.1:{free_port()}"
    found = local_chat_servers_detect(
        [
            {"kind": "ollama", "url": root},
            {"kind": "llama.cpp", "url": root.replace("127.0.0.1", "localhost")},
            {"kind": "llama.cpp", "url": nothing},
        ]
    )
    assert [(s.label, s.base_url, s.models) for s in found] == [
        ("Ollama", f"{root}/v1", ("qwen2.5-0.5b-instruct", "llama3.2:1b")),
        (
            "llama.cpp server",
            f"{root.replace('127.0.0.1', 'localhost')}/v1",
            ("qwen2.5-0.5b-instruct", "llama3.2:1b"),
        ),
    ]


def test_only_loopback_addresses_are_probed(chat_server, caplog):
    # The logger's own level: a Celery test worker may have raised the root logger's.
    with caplog.at_level(logging.WARNING, logger="query_app.model_settings.local_servers"):
        found = local_chat_servers_detect([{"kind": "ollama", "url": "http://192.0.2.10:11434"}])
    assert found == []
    assert [r.getMessage() for r in caplog.records] == [
        "not probing http://192.0.2.10:11434 for a local chat server: not a loopback address"
    ]
