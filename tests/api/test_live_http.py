"""End to end over real HTTP on loopback: token, collection, upload, job, query."""

from __future__ import annotations

import httpx

from tests.support.documents import INSTALL, REFUNDS


def test_a_client_uploads_then_asks_over_http(
    live_server, django_user_model, media_root, celery_eager, no_chat_model
):
    django_user_model.objects.create_user(username="alice", password="pw-alice")
    django_user_model.objects.create_user(username="bob", password="pw-bob")
    with httpx.Client(base_url=f"{live_server.url}/api", timeout=120) as http:

        def token(username: str, password: str) -> dict[str, str]:
            answer = http.post("/auth/token", data={"username": username, "password": password})
            assert answer.status_code == 200, answer.text
            return {"Authorization": f"Token {answer.json()['token']}"}

        alice, bob = token("alice", "pw-alice"), token("bob", "pw-bob")
        created = http.post("/collections", json={"name": "Live docs"}, headers=alice)
        assert created.status_code == 201, created.text
        slug = created.json()["slug"]

        files = [
            ("files", ("install.md", INSTALL.encode(), "text/markdown")),
            ("files", ("refunds.md", REFUNDS.encode(), "text/markdown")),
        ]
        upload = http.post(
            f"/collections/{slug}/sources/upload",
            files=files,
            headers={**alice, "Idempotency-Key": "live-1"},
        )
        assert upload.status_code == 202, upload.text
        job = http.get(f"/collections/{slug}/jobs/{upload.json()['job']['id']}", headers=alice)
        assert job.json()["status"] == "succeeded", job.text

        asked = http.post(
            f"/collections/{slug}/query",
            json={"question": "What does error ERR-4471 mean?"},
            headers=alice,
        )
        assert asked.status_code == 200, asked.text
        run = asked.json()
        assert "ERR-4471" in run["answer"]
        assert run["citations"][0]["source"] == "upload:install.md"

        assert http.get(f"/query-runs/{run['id']}", headers=alice).status_code == 200
        assert http.get(f"/query-runs/{run['id']}", headers=bob).status_code == 404
        stolen = http.post(f"/collections/{slug}/query", json={"question": "ERR-4471"}, headers=bob)
        assert stolen.status_code == 404
        assert "ERR-4471" not in stolen.text
        assert http.get("/collections", headers={}).status_code == 401
