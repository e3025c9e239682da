"""``rag query`` and ``rag retrieve``: ask a collection from the command line.

``--json`` prints one object (the stored run's payload: ``answer``, ``citations``,
``trace``, ...); otherwise the answer, the numbered sources and a one-line-per-stage
trace summary. Bad input exits with status 2 and a one-line reason.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from collections_app.selectors import CollectionNotFound
from query_app.exceptions import GenerationFailed, QueryError
from query_app.services import QueryRequest, query_answer

# Exit statuses: 2 = the request was wrong (usage, input, configuration);
# 1 = it was right but the chat model failed and no fallback was allowed.
EXIT_BAD_INPUT = 2
EXIT_FAILED = 1
DETAIL_ITEMS = 5


def add_ask_arguments(parser: CommandParser) -> None:
    parser.add_argument("question", nargs="+", help="the question (quote it or not)")
    parser.add_argument("--collection", required=True, help="collection slug")
    parser.add_argument("--profile", help="fast (default), balanced, quality, ...")
    parser.add_argument("--top-n", dest="top_n", type=int, help="how many passages to cite")
    parser.add_argument(
        "--option",
        dest="options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one option, e.g. retrieval.mode=hybrid (repeatable)",
    )
    parser.add_argument(
        "--no-fallback",
        dest="allow_fallback",
        action="store_false",
        help="fail instead of answering extractively when the chat model fails",
    )
    parser.add_argument(
        "--user",
        help="answer with this user's permissions and store the run under their name "
        "(default: a local operator who may read every collection; the run is stored "
        "without an owner)",
    )
    parser.add_argument("--json", dest="as_json", action="store_true", help="print one JSON object")


def _overrides(pairs: list[str]) -> dict[str, str]:
    overrides: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CommandError(
                f"--option needs KEY=VALUE (e.g. retrieval.mode=hybrid), got {pair!r}",
                returncode=EXIT_BAD_INPUT,
            )
        overrides[key.strip()] = value.strip()
    return overrides


def _caller(username: str | None) -> Any:
    """The user to answer as."""
    model = get_user_model()
    if username:
        user = model.objects.filter(**{model.USERNAME_FIELD: username}).first()
        if user is None:
            raise CommandError(f"no user named {username!r}", returncode=EXIT_BAD_INPUT)
        return user
    # Whoever runs manage.py already holds the database: a local operator may
    # read every collection. It is not a stored account; its runs have no owner.
    return model(**{model.USERNAME_FIELD: "local-operator"}, is_superuser=True)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def _ask(command: BaseCommand, *, retrieval_only: bool, **options: Any) -> None:
    user = _caller(options.get("user"))
    try:
        run = query_answer(
            user=user,
            request=QueryRequest(
                collection=options["collection"],
                question=" ".join(options["question"]),
                profile=options.get("profile"),
                top_n=options.get("top_n"),
                overrides=_overrides(options.get("options") or []),
                allow_fallback=options["allow_fallback"],
                retrieval_only=retrieval_only,
            ),
        )
    except GenerationFailed as exc:
        raise CommandError(_one_line(exc), returncode=EXIT_FAILED) from exc
    except (QueryError, CollectionNotFound) as exc:
        raise CommandError(_one_line(exc), returncode=EXIT_BAD_INPUT) from exc
    payload = run.as_payload()
    if options["as_json"]:
        command.stdout.write(json.dumps(payload, ensure_ascii=False))
    else:
        command.stdout.write(render_text(payload))


def render_text(payload: dict[str, Any]) -> str:
    """The answer, its numbered sources, then one line per pipeline stage."""
    lines = [payload["answer"]] if payload["answer"] else []
    lines += [f"({payload['mode_label']})", ""]
    citations = payload["citations"]
    lines.append("Sources:" if citations else "Sources: none")
    for c in citations:
        where = c["source"] + (f", page {c['page']}" if c.get("page") else "")
        # Passages given to the model but not cited in the answer are marked,
        # so the reader knows which ones carry the claims.
        uncited = "" if c.get("cited") or payload["retrieval_only"] else " (not cited)"
        lines.append(
            f"[{c['marker']}] {c['title'] or where} ({where}) "
            f"chars {c['char_start']}-{c['char_end']}, score {c['score']:.3f}{uncited}"
        )
        lines.append(f"    {' '.join(c['snippet'].split())}")
    lines += ["", "Trace:"]
    for step in payload["trace"]:
        lines.append("  " + _trace_line(step))
    for warning in payload.get("warnings") or []:
        lines.append(f"  warning: {warning}")
    total = (payload.get("timings") or {}).get("total_ms")
    if total is not None:
        lines.append(f"  total {total:.1f} ms")
    if payload.get("id"):
        lines.append(f"Stored as query run {payload['id']} (GET /api/query-runs/{payload['id']}).")
    return "\n".join(lines)


def _trace_line(step: dict[str, Any]) -> str:
    state = "skipped" if step.get("skipped") else f"{step['duration_ms']:9.1f} ms"
    scalars = [
        f"{key}={value}"
        for key, value in (step.get("details") or {}).items()
        if isinstance(value, str | int | float | bool) and len(str(value)) <= 40
    ][:DETAIL_ITEMS]
    warnings = len(step.get("warnings") or [])
    tail = f"  ({warnings} warning{'s' if warnings != 1 else ''})" if warnings else ""
    return f"{step['stage']:<13}{state:>12}  {' '.join(scalars)}{tail}".rstrip()


def handle_query(command: BaseCommand, **options: Any) -> None:
    _ask(command, retrieval_only=False, **options)


def handle_retrieve(command: BaseCommand, **options: Any) -> None:
    _ask(command, retrieval_only=True, **options)


ACTIONS = {
    "query": (
        "Answer a question from a collection, with citations and the trace.",
        add_ask_arguments,
        handle_query,
    ),
    "retrieve": (
        "Show the passages a question retrieves (no generation).",
        add_ask_arguments,
        handle_retrieve,
    ),
}
