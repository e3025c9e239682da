"""Test connection: one tiny chat request, and what went wrong in words a person can act on."""

from __future__ import annotations

from dataclasses import dataclass

from query_app.chat import (
    ChatBadResponse,
    ChatConfig,
    ChatConnectionError,
    ChatError,
    ChatHTTPError,
    ChatTimeout,
    OpenAICompatibleChatClient,
)
from query_app.model_settings.errors import Field, ModelSettingInvalid, NotAnAdministrator
from query_app.model_settings.store import (
    ModelSettingsChange,
    User,
    environment_value,
    is_model_settings_admin,
    model_setting_resolve,
    model_settings_saved,
)
from query_app.model_settings.validation import chat_base_url_validate

# One tiny request, no retries, a wait a person accepts.
TEST_TIMEOUT_S = 15.0
TEST_PROMPT = "Reply with the single word: pong"


@dataclass(frozen=True)
class ConnectionTest:
    """The outcome of one tiny chat request, in words for a person."""

    ok: bool
    message: str  # the model's reply when ok, else what went wrong and what to check
    base_url: str
    model: str
    reply: str = ""


def chat_connection_test(
    *, base_url: str, model: str, api_key: str, timeout_s: float = TEST_TIMEOUT_S
) -> ConnectionTest:
    """Send one tiny chat request to ``base_url`` as ``model`` and report the reply or the error."""
    try:
        base_url = chat_base_url_validate(base_url)
    except ModelSettingInvalid as exc:
        return ConnectionTest(False, str(exc), base_url, model)
    if not base_url or not model.strip():
        return ConnectionTest(
            False, "Enter a base URL and a model to test the connection.", base_url, model
        )
    model = model.strip()
    config = ChatConfig(
        base_url=base_url, model=model, api_key=api_key, timeout_s=timeout_s, max_retries=0
    )
    client = OpenAICompatibleChatClient(config)
    try:
        reply = client.complete(
            [{"role": "user", "content": TEST_PROMPT}], temperature=0.0, max_tokens=16
        )
    except ChatError as exc:
        return ConnectionTest(False, _connection_problem(exc, config), base_url, model)
    finally:
        client.close()
    reply = reply.strip()
    return ConnectionTest(True, f"{model} answered: {reply[:300]}", base_url, model, reply=reply)


def _connection_problem(exc: ChatError, config: ChatConfig) -> str:
    where = config.base_url
    if isinstance(exc, ChatTimeout):
        return (
            f"No answer from {where} within {config.timeout_s:g} seconds. The server may be "
            "loading the model (try again in a moment) or the address may be wrong."
        )
    if isinstance(exc, ChatConnectionError):
        detail = str(exc.__cause__ or exc)
        refused = "refused" in detail.lower() or "errno 111" in detail.lower()
        if refused:
            return f"Connection refused by {where}: is the server running and on this port?"
        return f"Cannot reach {where}: {detail}"
    if isinstance(exc, ChatHTTPError):
        if exc.status in (401, 403):
            return (
                f"{where} refused the request (HTTP {exc.status}): the API key is missing, "
                "wrong or not allowed to use this model."
            )
        if exc.status == 404:
            return (
                f"{where} answered HTTP 404: check that the base URL is the API root "
                f"(it usually ends in /v1) and that the model {config.model!r} exists there."
            )
        return f"{where} answered with an error: {exc}"
    if isinstance(exc, ChatBadResponse):
        return (
            f"{where} answered, but not with an OpenAI-compatible chat completion ({exc}). "
            "Is this the right address?"
        )
    return f"The chat request failed: {exc}"


def chat_connection_test_change(*, user: User, change: ModelSettingsChange) -> ConnectionTest:
    """Test the chat server ``change`` would give (not saved): its values where the
    environment leaves them open, else the environment's; the saved key when no new one.
    """
    if not is_model_settings_admin(user):
        raise NotAnAdministrator("only administrators can test the chat model connection")
    saved = model_settings_saved()

    def pick(field: Field, entered: str | None) -> str:
        env = environment_value(field)
        if env:
            return env
        if entered is not None:
            return entered
        return model_setting_resolve(field, saved=saved).value

    key = pick("chat_api_key", change.chat_api_key or None)
    if change.clear_chat_api_key and not environment_value("chat_api_key"):
        key = ""
    return chat_connection_test(
        base_url=pick("chat_base_url", change.chat_base_url),
        model=pick("chat_model", change.chat_model),
        api_key=key,
    )
