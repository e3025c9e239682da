"""What a chat base URL and a cross-encoder path must look like, with messages that say why."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from query_app.model_settings.errors import ModelSettingInvalid

# A Hugging Face model id: "name" or "owner/name", no path tricks.
MODEL_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


def chat_base_url_validate(value: str) -> str:
    """An http(s) API root such as http://127.0.0.1:11434/v1 (stripped), or ""."""
    value = value.strip()
    if not value:
        return ""
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ModelSettingInvalid(
            "Enter the server's API root as an http:// or https:// address, "
            "for example http://127.0.0.1:11434/v1 (Ollama) or https://api.openai.com/v1.",
            field="chat_base_url",
        )
    if parts.query or parts.fragment:
        raise ModelSettingInvalid(
            "The base URL is the API root only, without ?query or #fragment.",
            field="chat_base_url",
        )
    if parts.path.rstrip("/").endswith("/chat/completions"):
        raise ModelSettingInvalid(
            "Enter the API root without /chat/completions (it is added to every request), "
            f"i.e. {value.rstrip('/')[: -len('/chat/completions')]}.",
            field="chat_base_url",
        )
    return value


def rerank_model_validate(value: str) -> str:
    """A directory holding a cross-encoder, or a model id in the local Hugging Face cache.

    Nothing is downloaded at run time, so a model id must already be cached here.
    """
    value = value.strip()
    if not value:
        return ""
    looks_like_path = value.startswith(("/", "~", ".")) or "\\" in value or value.count("/") > 1
    if looks_like_path:
        path = Path(value).expanduser()
        if not path.is_absolute():
            raise ModelSettingInvalid(
                f"Give the model directory as an absolute path (got {value!r}).",
                field="rerank_model",
            )
        if not path.exists():
            raise ModelSettingInvalid(
                f"There is no directory {str(path)!r} on the server.", field="rerank_model"
            )
        if not path.is_dir():
            raise ModelSettingInvalid(
                f"{str(path)!r} is a file; give the directory that holds the model.",
                field="rerank_model",
            )
        markers = ("config.json", "model.onnx", "onnx/model.onnx")
        if not any((path / marker).is_file() for marker in markers):
            raise ModelSettingInvalid(
                f"{str(path)!r} holds no model: expected a sentence-transformers CrossEncoder "
                "(config.json) or a model.onnx with its tokenizer.",
                field="rerank_model",
            )
        return str(path)
    if not MODEL_ID_RE.match(value):
        raise ModelSettingInvalid(
            "Enter an absolute path to a model directory or a model id such as "
            "cross-encoder/ms-marco-MiniLM-L-6-v2.",
            field="rerank_model",
        )
    from huggingface_hub import try_to_load_from_cache

    if not isinstance(try_to_load_from_cache(value, "config.json"), str):
        raise ModelSettingInvalid(
            f"The model {value!r} is not in this machine's Hugging Face cache, and nothing is "
            "downloaded at run time: fetch it once on a machine with network access (see the "
            "README) and give its directory here.",
            field="rerank_model",
        )
    return value
