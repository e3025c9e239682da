"""The OpenAI-compatible chat client against a scripted server on 127.0.0.1.

No chat model can run here, so ``ScriptedChatServer`` (a real HTTP server in a
thread) speaks the ``/v1/chat/completions`` protocol with scripted replies:
completions, Server-Sent-Event streams, errors, slowness and garbage.
"""

from __future__ import annotations

import pytest

from query_app.chat import (
    ChatBadResponse,
    ChatConfig,
    ChatConnectionError,
    ChatHTTPError,
    ChatTimeout,
    OpenAICompatibleChatClient,
    chat_client_from_settings,
)
from tests.support.chat_server import Reply, completion, streamed
from tests.support.processes import free_port

MESSAGES = [{"role": "user", "content": "Say hello."}]


def client_for(server, **overrides) -> OpenAICompatibleChatClient:
    config = ChatConfig(
        base_url=server.base_url,
        model="scripted-model",
        api_key="sk-test",
        timeout_s=overrides.pop("timeout_s", 5.0),
        max_retries=overrides.pop("max_retries", 2),
        backoff_s=0.01,
        max_backoff_s=0.05,
    )
    return OpenAICompatibleChatClient(config)


def test_completion_returns_the_assistant_message(chat_server):
    chat_server.script(completion("Hello there."))
    client = client_for(chat_server)
    assert client.complete(MESSAGES, temperature=0.2, max_tokens=50) == "Hello there."
    request = chat_server.requests[0]
    assert request == {
        "model": "scripted-model",
        "messages": MESSAGES,
        "stream": False,
        "temperature": 0.2,
        "max_tokens": 50,
    }
    assert chat_server.headers[0]["Authorization"] == "Bearer sk-test"


def test_streaming_yields_the_sse_pieces_in_order(chat_server):
    chat_server.script(streamed(["Hel", "lo ", "there."]))
    client = client_for(chat_server)
    assert list(client.stream(MESSAGES)) == ["Hel", "lo ", "there."]
    assert chat_server.requests[0]["stream"] is True


def test_server_errors_are_retried_with_backoff(chat_server):
    chat_server.script(Reply(status=500, json_body={"error": "boom"}), completion("Recovered."))
    client = client_for(chat_server)
    assert client.complete(MESSAGES) == "Recovered."
    assert len(chat_server.requests) == 2


def test_rate_limiting_is_retried(chat_server):
    chat_server.script(
        Reply(status=429, json_body={"error": "slow down"}, headers={"Retry-After": "0"}),
        streamed(["ok"]),
    )
    client = client_for(chat_server)
    assert list(client.stream(MESSAGES)) == ["ok"]
    assert len(chat_server.requests) == 2


def test_retries_are_bounded(chat_server):
    chat_server.script(*[Reply(status=503, json_body={"error": "down"})] * 5)
    client = client_for(chat_server, max_retries=2)
    with pytest.raises(ChatHTTPError) as err:
        client.complete(MESSAGES)
    assert err.value.status == 503
    assert len(chat_server.requests) == 3


def test_client_errors_are_not_retried(chat_server):
    chat_server.script(Reply(status=400, json_body={"error": "bad model"}), completion("never"))
    client = client_for(chat_server)
    with pytest.raises(ChatHTTPError, match="HTTP 400"):
        client.complete(MESSAGES)
    assert len(chat_server.requests) == 1


def test_a_slow_server_times_out_without_retrying(chat_server):
    chat_server.script(Reply(delay_s=1.0, json_body={"choices": []}), completion("late"))
    client = client_for(chat_server, timeout_s=0.2)
    with pytest.raises(ChatTimeout, match=r"did not answer within 0\.2s"):
        client.complete(MESSAGES)
    assert len(chat_server.requests) == 1


def test_garbage_json_is_a_bad_response(chat_server):
    chat_server.script(Reply(raw=b"<html>proxy error</html>"))
    with pytest.raises(ChatBadResponse, match="non-JSON"):
        client_for(chat_server).complete(MESSAGES)


def test_json_without_a_message_is_a_bad_response(chat_server):
    chat_server.script(Reply(json_body={"result": "hello"}))
    with pytest.raises(ChatBadResponse, match=r"choices\[0\]\.message\.content"):
        client_for(chat_server).complete(MESSAGES)


def test_garbage_in_a_stream_is_a_bad_response(chat_server):
    chat_server.script(Reply(stream_raw=['{"choices": [{"delta": {"content": "Hi"}}]}', "{oops"]))
    client = client_for(chat_server)
    pieces = []
    with pytest.raises(ChatBadResponse, match="non-JSON event"):
        for piece in client.stream(MESSAGES):
            pieces.append(piece)
    assert pieces == ["Hi"]


def test_an_unreachable_endpoint_is_a_connection_error():
    port = free_port()
    config = ChatConfig(
        base_url=f"http://127.0.0.1:{port}/v1",
        model="m",
        max_retries=1,
        backoff_s=0.01,
    )
    with pytest.raises(ChatConnectionError, match="cannot reach the chat endpoint"):
        OpenAICompatibleChatClient(config).complete(MESSAGES)


def test_no_client_without_a_base_url_and_model(db, rag_set, chat_server):
    # db: with the environment unset, the model settings page's saved values are read.
    rag_set("chat", {"base_url": "", "model": ""})
    assert chat_client_from_settings() is None
    rag_set("chat", {"base_url": chat_server.base_url, "model": "m", "timeout_s": 3})
    client = chat_client_from_settings()
    assert isinstance(client, OpenAICompatibleChatClient)
    assert client.config.timeout_s == 3.0
