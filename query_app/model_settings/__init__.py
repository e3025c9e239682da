"""Model settings an administrator sets in the browser: the chat server and the cross-encoder.

What applies, field by field: the environment variable when it is set
(``RAG_CHAT_BASE_URL``, ``RAG_CHAT_MODEL``, ``RAG_CHAT_API_KEY``,
``RAG_RERANK_MODEL``, read into ``settings.RAG``), else the value saved on the
settings page (one ``ModelSettings`` row), else nothing (extractive answers, no
cross-encoder).

Every process reads the saved row at most once per ``REFRESH_S`` seconds, so a
change saved by the web server is seen by the other processes (gunicorn
workers, the Celery worker) within that time, without a restart; the process
that saves sees it at once. The API key is stored encrypted with a key derived
from ``SECRET_KEY`` and never leaves this module except towards the chat server.
"""

from query_app.model_settings.connection import (
    TEST_TIMEOUT_S,
    ConnectionTest,
    chat_connection_test,
    chat_connection_test_change,
)
from query_app.model_settings.crypto import api_key_decrypt, api_key_encrypt
from query_app.model_settings.errors import (
    Field,
    ModelSettingInvalid,
    ModelSettingsError,
    NotAnAdministrator,
)
from query_app.model_settings.local_servers import (
    LocalServer,
    is_loopback_url,
    local_chat_servers_detect,
)
from query_app.model_settings.store import (
    ENV_VARS,
    FIELDS,
    REFRESH_S,
    ModelSettingsChange,
    ModelSettingsOverview,
    ResolvedSetting,
    SavedModelSettings,
    chat_endpoint_resolve,
    is_model_settings_admin,
    model_setting_resolve,
    model_settings_forget,
    model_settings_overview,
    model_settings_save,
    model_settings_saved,
    options_with_saved_models,
    rerank_model_resolve,
)
from query_app.model_settings.validation import chat_base_url_validate, rerank_model_validate

__all__ = [
    "ENV_VARS",
    "FIELDS",
    "REFRESH_S",
    "TEST_TIMEOUT_S",
    "ConnectionTest",
    "Field",
    "LocalServer",
    "ModelSettingInvalid",
    "ModelSettingsChange",
    "ModelSettingsError",
    "ModelSettingsOverview",
    "NotAnAdministrator",
    "ResolvedSetting",
    "SavedModelSettings",
    "api_key_decrypt",
    "api_key_encrypt",
    "chat_base_url_validate",
    "chat_connection_test",
    "chat_connection_test_change",
    "chat_endpoint_resolve",
    "is_loopback_url",
    "is_model_settings_admin",
    "local_chat_servers_detect",
    "model_setting_resolve",
    "model_settings_forget",
    "model_settings_overview",
    "model_settings_save",
    "model_settings_saved",
    "options_with_saved_models",
    "rerank_model_resolve",
    "rerank_model_validate",
]
