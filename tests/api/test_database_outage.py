"""While the database cannot be reached, the API answers JSON 503s, never a 500 page."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.support.clients import token_client


@pytest.fixture
def database_down(db):  # type: ignore[no-untyped-def]
    """Point this process's connection at a socket folder where no server listens.

    A real connection failure from psycopg, not a stand-in; the shared server
    itself keeps running for everyone else. Restored afterwards.
    """
    params = connection.settings_dict
    saved = params["HOST"]

    def stop() -> None:
        connection.close()
        params["HOST"] = "/nonexistent-ragsite-socket-dir"

    yield stop
    connection.close()
    params["HOST"] = saved


@pytest.mark.django_db(transaction=True)
def test_the_api_answers_json_503_while_the_database_is_down(user, collection, database_down):
    client = token_client(user)
    assert client.get("/api/collections/docs/sources").status_code == 200

    database_down()
    response = client.get("/api/collections/docs/sources")

    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "database_unavailable"
    assert "temporarily unavailable" in response.json()["detail"]
    assert response["Retry-After"]
