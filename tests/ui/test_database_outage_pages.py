"""While the database cannot be reached, pages say "temporarily unavailable" (503)."""

from __future__ import annotations

import pytest
from django.db import connection


@pytest.mark.django_db(transaction=True)
def test_a_page_says_temporarily_unavailable_while_the_database_is_down(alice, collection):
    assert alice.get("/collections/handbook/").status_code == 200
    params = connection.settings_dict
    saved = params["HOST"]
    connection.close()
    # No server listens there: psycopg fails to connect, as with a stopped database.
    params["HOST"] = "/nonexistent-ragsite-socket-dir"
    try:
        response = alice.get("/collections/handbook/")
    finally:
        connection.close()
        params["HOST"] = saved

    assert response.status_code == 503
    page = response.content.decode()
    assert "Temporarily unavailable" in page
    assert "Traceback" not in page and "Server Error" not in page
    assert response["Retry-After"]
