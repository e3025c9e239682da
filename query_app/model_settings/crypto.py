"""The chat API key at rest: Fernet with a key derived (HKDF/SHA-256) from SECRET_KEY."""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from query_app.model_settings.errors import ModelSettingsError


def _fernet() -> Fernet:
    # A key of its own, derived from SECRET_KEY: the raw SECRET_KEY is never the cipher key.
    derived = HKDF(
        algorithm=hashes.SHA256(),
        length=32,
        salt=b"ragsite.model-settings",
        info=b"chat api key",
    ).derive(str(settings.SECRET_KEY).encode())
    return Fernet(base64.urlsafe_b64encode(derived))


def api_key_encrypt(key: str) -> str:
    """The Fernet token stored for ``key``."""
    return _fernet().encrypt(key.encode()).decode("ascii")


def api_key_decrypt(token: str) -> str:
    """The key a token holds; ModelSettingsError when SECRET_KEY changed since it was saved."""
    try:
        return _fernet().decrypt(token.encode("ascii")).decode()
    except (InvalidToken, ValueError):
        raise ModelSettingsError(
            "the saved API key cannot be decrypted (SECRET_KEY changed since it was saved): "
            "enter the key again on the Model settings page"
        ) from None
