"""Chat models behind one small interface.

``ChatClient`` is all the pipeline knows: ``complete(messages) -> str`` and
``stream(messages) -> Iterator[str]``. The one implementation speaks the
OpenAI-compatible ``/chat/completions`` protocol (OpenAI, Ollama, vLLM,
llama.cpp server, ...). It is configured by ``RAG_CHAT_BASE_URL``,
``RAG_CHAT_MODEL`` and ``RAG_CHAT_API_KEY`` (``settings.RAG["chat"]``) or, for
each one left unset, by an administrator on the model settings page
(``query_app.model_settings``). With no base URL or model configured there is
no client, and the pipeline answers extractively.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

logger = logging.getLogger(__name__)

ChatMessage = Mapping[str, str]

# Statuses worth another try: rate limiting and server-side trouble.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class ChatError(Exception):
    """The chat model could not produce an answer; the message says why."""


class ChatConnectionError(ChatError):
    """The chat endpoint could not be reached (refused, reset, DNS)."""


class ChatTimeout(ChatError):
    """The chat endpoint did not answer within the configured timeout."""


class ChatHTTPError(ChatError):
    """The chat endpoint answered with an HTTP error status."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class ChatBadResponse(ChatError):
    """The chat endpoint answered something that is not a usable completion."""


class ChatClient(Protocol):
    """What every chat model offers the pipeline."""

    @property
    def name(self) -> str:
        """A label for traces, e.g. the model name."""
        ...

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> str:
        """The assistant's full reply to ``messages``."""
        ...

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> Iterator[str]:
        """The assistant's reply to ``messages``, piece by piece."""
        ...


@dataclass(frozen=True)
class ChatConfig:
    """Where and how to reach an OpenAI-compatible chat endpoint."""

    base_url: str
    model: str
    api_key: str = ""
    timeout_s: float = 60.0
    max_retries: int = 2
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0

    @classmethod
    def from_settings(cls) -> ChatConfig | None:
        """The endpoint that applies, or None when no base URL or model is set.

        Each of the base URL, model and API key comes from its environment
        variable when set, else from the model settings page (read again within
        ``query_app.model_settings.REFRESH_S``: no restart needed).
        """
        from django.conf import settings

        from query_app.model_settings import chat_endpoint_resolve

        block: Mapping[str, Any] = settings.RAG.get("chat", {})
        base_url, model, api_key = chat_endpoint_resolve()
        if not base_url or not model:
            return None
        return cls(
            base_url=base_url,
            model=model,
            api_key=api_key,
            timeout_s=float(block.get("timeout_s", 60.0)),
            max_retries=int(block.get("max_retries", 2)),
            backoff_s=float(block.get("backoff_s", 0.5)),
            max_backoff_s=float(block.get("max_backoff_s", 8.0)),
        )


class OpenAICompatibleChatClient:
    """A chat client for any server speaking the OpenAI ``/chat/completions`` protocol.

    ``base_url`` is the API root (``http://localhost:11434/v1`` for Ollama,
    ``https://api.openai.com/v1``); ``/chat/completions`` is appended.
    Connection errors, 429 and 5xx are retried with exponential backoff. A read
    timeout is not retried: a model that used the whole timeout will most likely
    do so again, and retrying would multiply the user's wait.
    """

    def __init__(self, config: ChatConfig, *, transport: httpx.BaseTransport | None = None) -> None:
        self.config = config
        headers = {"Accept": "application/json"}
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        self._http = httpx.Client(
            base_url=config.base_url.rstrip("/") + "/",
            headers=headers,
            timeout=httpx.Timeout(config.timeout_s, connect=min(config.timeout_s, 10.0)),
            transport=transport,
        )

    @property
    def name(self) -> str:
        return self.config.model

    def close(self) -> None:
        self._http.close()

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> str:
        """POST one completion request and return the assistant's message content."""
        body = self._body(messages, temperature=temperature, max_tokens=max_tokens, stream=False)
        response = self._send(body, stream=False)
        try:
            payload = response.json()
        except ValueError:
            raise ChatBadResponse(
                f"the chat endpoint answered non-JSON: {response.text[:200]!r}"
            ) from None
        content = _message_content(payload)
        if not content.strip():
            raise ChatBadResponse("the chat endpoint answered an empty message")
        return content

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> Iterator[str]:
        """Stream the reply as Server-Sent Events (``data: {...}`` lines, ``data: [DONE]``)."""
        body = self._body(messages, temperature=temperature, max_tokens=max_tokens, stream=True)
        response = self._send(body, stream=True)
        received = False
        try:
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    # Comments (": keep-alive"), "event:" lines and blank separators.
                    continue
                data = line[len("data:") :].strip()
                if data == "[DONE]":
                    break
                try:
                    event = json.loads(data)
                except ValueError:
                    raise ChatBadResponse(
                        f"the chat endpoint streamed a non-JSON event: {data[:200]!r}"
                    ) from None
                piece = _delta_content(event)
                if piece:
                    received = True
                    yield piece
        except httpx.TimeoutException as exc:
            raise ChatTimeout(f"the chat stream stalled for {self.config.timeout_s:g}s") from exc
        except httpx.TransportError as exc:
            raise ChatConnectionError(f"the chat stream was interrupted: {exc}") from exc
        finally:
            response.close()
        if not received:
            raise ChatBadResponse("the chat endpoint streamed no content")

    def _body(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None,
        max_tokens: int | None,
        stream: bool,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [dict(m) for m in messages],
            "stream": stream,
        }
        if temperature is not None:
            body["temperature"] = temperature
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        return body

    def _send(self, body: dict[str, Any], *, stream: bool) -> httpx.Response:
        """Send with retries; return a response with a 2xx status."""
        attempts = self.config.max_retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                request = self._http.build_request("POST", "chat/completions", json=body)
                response = self._http.send(request, stream=stream)
            except httpx.TimeoutException as exc:
                if isinstance(exc, httpx.ConnectTimeout) and not last:
                    self._sleep(attempt, reason="connect timeout")
                    continue
                raise ChatTimeout(
                    f"the chat endpoint {self.config.base_url} did not answer within "
                    f"{self.config.timeout_s:g}s"
                ) from exc
            except httpx.TransportError as exc:
                if not last:
                    self._sleep(attempt, reason=f"connection error: {exc}")
                    continue
                raise ChatConnectionError(
                    f"cannot reach the chat endpoint {self.config.base_url}: {exc}"
                ) from exc
            if response.status_code < 300:
                return response
            if stream:
                response.read()
            response.close()
            if response.status_code in RETRY_STATUSES and not last:
                self._sleep(
                    attempt,
                    reason=f"HTTP {response.status_code}",
                    retry_after=response.headers.get("Retry-After"),
                )
                continue
            raise ChatHTTPError(
                f"the chat endpoint answered HTTP {response.status_code}: {response.text[:200]!r}",
                status=response.status_code,
            )
        raise AssertionError("unreachable: the loop returns or raises")

    def _sleep(self, attempt: int, *, reason: str, retry_after: str | None = None) -> None:
        delay = min(self.config.backoff_s * (2**attempt), self.config.max_backoff_s)
        if retry_after:
            with contextlib.suppress(ValueError):
                delay = min(max(delay, float(retry_after)), self.config.max_backoff_s)
        logger.warning("chat request failed (%s); retrying in %.2fs", reason, delay)
        time.sleep(delay)


def _message_content(payload: Any) -> str:
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ChatBadResponse(
            f"the chat endpoint answered without choices[0].message.content: "
            f"{json.dumps(payload)[:200]}"
        ) from None
    if not isinstance(content, str):
        raise ChatBadResponse("the chat endpoint answered a non-text message content")
    return content


def _delta_content(event: Any) -> str:
    try:
        choice = event["choices"][0]
    except (KeyError, IndexError, TypeError):
        # Some servers send a final usage-only event without choices.
        if isinstance(event, dict) and "usage" in event:
            return ""
        raise ChatBadResponse(
            f"the chat endpoint streamed an event without choices: {json.dumps(event)[:200]}"
        ) from None
    delta = choice.get("delta") or choice.get("message") or {}
    content = delta.get("content") if isinstance(delta, dict) else None
    return content if isinstance(content, str) else ""


class CountingChatClient:
    """Wraps a client and counts model calls (a stream counts as one call)."""

    def __init__(self, inner: ChatClient) -> None:
        self.inner = inner
        self.calls = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> str:
        self.calls += 1
        return self.inner.complete(messages, temperature=temperature, max_tokens=max_tokens)

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> Iterator[str]:
        self.calls += 1
        return self.inner.stream(messages, temperature=temperature, max_tokens=max_tokens)


def chat_client_from_settings() -> ChatClient | None:
    """The configured chat client, or None when no chat model is configured."""
    config = ChatConfig.from_settings()
    return OpenAICompatibleChatClient(config) if config else None
