"""Server paths through the API: superusers only, inside RAG_INGEST_ROOTS, never the app's files.

The attack these stop: a staff user with the write role on a collection of
their own named another collection's stored upload, ``/etc/passwd`` and the
settings module as "server paths", and got their contents back as answers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from collections_app.models import Chunk, IngestionJob, Source
from collections_app.services import collection_create
from tests.support.clients import token_client
from tests.support.documents import INSTALL, REFUNDS, upload

LOCATIONS = "/api/collections/docs/sources/locations"
SECRET = "The merger with Initech closes on 12 March."


@pytest.fixture
def root(tmp_path, rag_set) -> Path:
    """The one folder opened to the web (RAG_INGEST_ROOTS), holding install.md."""
    opened = tmp_path / "opened"
    opened.mkdir()
    (opened / "install.md").write_text(INSTALL)
    rag_set("ingestion.roots", [str(opened)])
    return opened


@pytest.fixture
def secret(tmp_path) -> Path:
    """A file outside every root."""
    path = tmp_path / "secret.md"
    path.write_text(f"# Board notes\n\n{SECRET}\n")
    return path


@pytest.fixture
def admin(django_user_model, collection):  # type: ignore[no-untyped-def]
    """root: a superuser; ``collection`` (docs) is alice's."""
    return django_user_model.objects.create_superuser(username="root", password="pw-root")


def _post(client, locations: list[str]):  # type: ignore[no-untyped-def]
    return client.post(LOCATIONS, {"locations": locations}, format="json")


def test_staff_who_is_not_a_superuser_may_not_name_server_paths(
    api, user, collection, root, celery_eager, django_capture_on_commit_callbacks
):
    user.is_staff = True
    user.save()

    with django_capture_on_commit_callbacks(execute=True):
        refused = _post(api, [str(root / "install.md")])

    assert refused.status_code == 403, refused.content
    assert "superusers" in refused.json()["detail"]
    assert not IngestionJob.objects.exists()
    assert not Source.objects.exists()


def test_superuser_reads_server_paths_only_inside_the_allowed_roots(
    admin, collection, root, secret, celery_eager, django_capture_on_commit_callbacks
):
    client = token_client(admin)

    for outside in (str(secret), "/etc/passwd", str(secret.parent / "*.md")):
        refused = _post(client, [outside])
        assert refused.status_code == 403, (outside, refused.content)
        assert "RAG_INGEST_ROOTS" in refused.json()["detail"]
    assert not IngestionJob.objects.exists()

    with django_capture_on_commit_callbacks(execute=True):
        accepted = _post(client, [str(root / "*.md")])
    assert accepted.status_code == 202, accepted.content
    job = IngestionJob.objects.get(pk=accepted.json()["job"]["id"])
    assert job.status == "succeeded", job.report
    assert Chunk.objects.filter(collection=collection, text__contains="ERR-4471").exists()
    assert not Chunk.objects.filter(text__contains="Initech").exists()


def test_the_demo_corpus_is_open_by_default(admin, collection, celery_eager):
    demo = Path(settings.BASE_DIR) / "demo_corpus"
    files = sorted(p for p in demo.iterdir() if p.is_file())

    response = _post(token_client(admin), [str(files[0])])

    assert response.status_code == 202, response.content


def test_links_and_dotdot_do_not_lead_out_of_a_root(
    admin, collection, root, secret, celery_eager, django_capture_on_commit_callbacks
):
    (root / "notes.md").symlink_to(secret)
    client = token_client(admin)

    for escape in (str(root / "notes.md"), f"{root}/../{secret.name}"):
        refused = _post(client, [escape])
        assert refused.status_code == 403, (escape, refused.content)

    # A folder under the root is accepted; the link inside it is refused as it is read.
    with django_capture_on_commit_callbacks(execute=True):
        accepted = _post(client, [str(root)])
    assert accepted.status_code == 202, accepted.content
    report = IngestionJob.objects.get(pk=accepted.json()["job"]["id"]).report
    outcomes = {Path(s["location"]).name: s for s in report["sources"]}
    assert outcomes["install.md"]["status"] == "ingested"
    assert outcomes["notes.md"]["status"] == "failed"
    assert "RAG_INGEST_ROOTS" in outcomes["notes.md"]["reason"]
    assert not Chunk.objects.filter(text__contains="Initech").exists()


def test_the_apps_own_files_are_never_read_even_when_a_root_holds_them(
    admin,
    collection,
    rag_set,
    media_root,
    celery_eager,
    django_capture_on_commit_callbacks,
):
    # Another collection's upload, stored by the app under MEDIA_ROOT.
    other = collection_create(name="Board", slug="board")
    with django_capture_on_commit_callbacks(execute=True):
        token_client(admin).post(
            "/api/collections/board/sources/upload",
            {"files": [upload("board.md", f"# Board\n\n{SECRET}\n")]},
            format="multipart",
        )
    stored = Path(Source.objects.get(collection=other).file.path)
    project = Path(settings.BASE_DIR)
    # Roots that hold the project and the media folder: "/" and their parents.
    rag_set("ingestion.roots", ["/", str(project.parent), str(Path(media_root).parent)])
    client = token_client(admin)

    for own in (
        str(stored),
        str(Path(media_root) / "**" / "*.md"),
        str(project / "ragsite" / "settings.py"),
        str(project / "manage.py"),
        str(Path(settings.VAR_DIR) / "secret_key"),
    ):
        refused = _post(client, [own])
        assert refused.status_code == 403, (own, refused.content)
        assert "own files" in refused.json()["detail"]
    assert not Chunk.objects.filter(collection__slug="docs").exists()


def test_uploads_are_stored_in_a_folder_per_collection(
    api, user, collection, media_root, celery_eager, django_capture_on_commit_callbacks
):
    second = collection_create(name="Second", slug="second", user=user)
    with django_capture_on_commit_callbacks(execute=True):
        for slug in ("docs", "second"):
            response = api.post(
                f"/api/collections/{slug}/sources/upload",
                {"files": [upload("refunds.md", REFUNDS)]},
                format="multipart",
            )
            assert response.status_code == 202, response.content

    for owner in (collection, second):
        source = Source.objects.get(collection=owner)
        assert source.file.name.startswith(f"uploads/{owner.pk}/")
        assert Path(source.file.path).is_relative_to(Path(media_root) / "uploads" / str(owner.pk))
        assert source.status == "ready"


def test_the_cli_operator_may_read_any_path(collection, secret, root):
    """The local operator is trusted: ``rag ingest`` is not limited to the roots (README)."""
    call_command("rag", "ingest", "--collection", "docs", str(secret))

    assert Chunk.objects.filter(collection=collection, text__contains="Initech").exists()
