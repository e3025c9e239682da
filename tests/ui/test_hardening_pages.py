"""What an attacker found in the pages (issue 13): 500s from odd input, missing protections.

Every test here failed before its fix.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "field",
    ["question", "collection"],
)
def test_a_nul_character_in_the_ask_form_is_a_clear_400(alice, ingested, field):
    data = {"collection": "handbook", "profile": "fast", "question": "How much disk space?"}
    data[field] = data[field][:4] + "\x00" + data[field][4:]
    for url in ("/ask/", "/ask/stream/"):
        response = alice.post(url, data)
        assert response.status_code == 400, (url, response.status_code)
        page = response.content.decode()
        assert "The question was not asked" in page
        assert f"the {field} field: null characters are not allowed" in page
