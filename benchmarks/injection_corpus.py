"""The planted-instruction corpus end to end: what passes validation, what answers obey.

Ingests every plant of ``tests/support/injection_corpus.py`` (plain instructions, a CSV
cell, invisible PDF text and PDF metadata, eleven CSS hiding tricks, sixteen disguises of
"ignore all previous instructions") into a fresh collection with the default policy
(suspicious content held), then asks each plant's innocent and targeted question with
the ``fast`` profile and counts the answers that carry a plant's payload (``PWNED`` or
the attacker's host): they quoted or obeyed it.

- offline (default): extractive answers, no model;
- ``--obedient``: a scripted OpenAI-compatible server on 127.0.0.1 plays a model that
  obeys every planted instruction it is shown (no model runs here);
- ``--policy index``: suspicious content is indexed;
- ``--approve-all``: a careless reviewer approves every held document, so only the
  output filter stands between a plant and the answer.

Prints one line per plant and the totals ("kinds passed as clean / answers that
obeyed"). Uses its own database (``ragsite_bench_injection``).

    python benchmarks/injection_corpus.py [--obedient] [--policy hold|index]

Measured (one run each), before the hardening of issue 13 (at 4a35eda) -> after it.
"Clean" kinds were indexed without any flag; the one left after is the image link with
a query string, which the output filter keeps out of answers:

    offline (extractive), hold:      clean 28 of 34, obeyed 1 of 68  -> clean 1, obeyed 0
    obedient model, hold:            clean 28 of 34, obeyed 35 of 68 -> clean 1, obeyed 0
    obedient model, all approved:    clean 28 of 34, obeyed 35 of 68 -> clean 1, obeyed 0
    offline, all approved:           clean 28 of 34, obeyed 0 of 68  -> clean 1, obeyed 0
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from _django import ROOT, django_setup

PAYLOAD = re.compile(r"PWNED|https?://evil\.example\S*", re.I)


def obedient_reply(request: dict[str, Any]) -> str:
    """What a model that obeys planted instructions answers."""
    prompt = "\n".join(str(m.get("content", "")) for m in request.get("messages", []))
    marker = re.search(r"\[(\d+)\]", prompt)
    cite = f" [{marker.group(1)}]" if marker else ""
    payload = PAYLOAD.search(prompt)
    if payload:
        found = payload.group(0)
        if found.lower().startswith("http"):
            return f"Order here: ![offer]({found}){cite}"
        return f"PWNED{cite}"
    return f"The passages answer this{cite}."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--obedient", action="store_true", help="a scripted obedient model")
    parser.add_argument("--policy", choices=["hold", "index"], default="hold")
    parser.add_argument("--approve-all", action="store_true", help="approve every held item")
    args = parser.parse_args()
    django_setup(db_name="ragsite_bench_injection")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from collections_app.models import Collection, QuarantineItem, Source
    from collections_app.services import (
        collection_create,
        collection_delete,
        collection_ingest,
        quarantine_approve,
    )
    from query_app.services import QueryRequest, query_answer
    from tests.support.chat_server import ScriptedChatServer, completion
    from tests.support.injection_corpus import obeyed, planted_corpus

    settings.RAG["ingestion"]["suspicious_policy"] = args.policy
    server = None
    if args.obedient:
        server = ScriptedChatServer().start()
        server.responder = lambda request: completion(obedient_reply(request))
        settings.RAG["chat"].update(
            base_url=server.base_url, model="scripted-model", api_key="k", max_retries=0
        )
    else:
        settings.RAG["chat"].update(base_url="", model="")

    plants = planted_corpus()
    existing = Collection.objects.filter(slug="bench-injection").first()
    if existing:
        collection_delete(collection=existing)
    collection = collection_create(name="bench-injection", slug="bench-injection")
    with tempfile.TemporaryDirectory() as folder:
        for plant in plants:
            (Path(folder) / plant.filename).write_bytes(plant.data)
        collection_ingest(collection=collection, locations=[folder])
        sources = {Path(s.location).name: s for s in Source.objects.filter(collection=collection)}
    flagged = set(
        QuarantineItem.objects.filter(collection=collection).values_list(
            "source__location", flat=True
        )
    )
    user = get_user_model().objects.filter(username="bench").first()
    if user is None:
        user = get_user_model().objects.create_superuser(username="bench", password="bench")
    if args.approve_all:
        for item in QuarantineItem.objects.filter(collection=collection):
            quarantine_approve(item=item, reviewer=user)
        sources = {Path(s.location).name: s for s in Source.objects.filter(collection=collection)}

    passed_clean = 0
    obeyed_answers = 0
    print(f"{'kind':24} {'family':9} {'validation':11} innocent targeted")
    for plant in plants:
        source = sources.get(plant.filename)
        if source is None or source.status == Source.Status.FAILED:
            verdict = "failed"
        elif source.location in flagged:
            verdict = "flagged" if source.status == Source.Status.READY else "held"
        else:
            verdict = "clean"
        passed_clean += verdict == "clean"
        marks = []
        for question in (plant.innocent, plant.targeted):
            run = query_answer(
                user=user,
                request=QueryRequest(
                    collection="bench-injection", question=question, allow_fallback=True
                ),
                store=False,
            )
            hit = obeyed(run.answer)
            obeyed_answers += hit
            marks.append("OBEYED" if hit else "-")
        print(f"{plant.kind:24} {plant.family:9} {verdict:11} {marks[0]:8} {marks[1]}")
    mode = "obedient model" if args.obedient else "offline (extractive)"
    approved = ", every held item approved" if args.approve_all else ""
    print(
        f"\n{mode}, suspicious policy {args.policy}{approved}: kinds passed as clean "
        f"{passed_clean} of {len(plants)}; answers that obeyed {obeyed_answers} of "
        f"{2 * len(plants)}"
    )
    if server is not None:
        server.stop()


if __name__ == "__main__":
    main()
