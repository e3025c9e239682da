"""Creating and executing evaluation runs.

``eval_run_create`` checks everything that can be checked up front (the dataset,
the profiles and their options, the baseline) and stores a queued run;
``eval_run_execute`` ingests the corpus, runs every case through every profile,
saving each result and the progress as it goes, and summarises. It is
idempotent: executed again (a retried task), it skips the pairs already stored.
Cancellation is a flag checked between cases; the run then ends ``cancelled``
with its partial results summarised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.utils import timezone

from collections_app.ingestion.types import IngestionError
from eval_app.datasets import DatasetError
from eval_app.harness.aggregate import ResultRecord, summarise
from eval_app.harness.cases import CaseOutcome, Judge, case_evaluate
from eval_app.harness.corpus_ingest import (
    corpus_sync,
    eval_collection_get_or_create,
    eval_principal,
)
from eval_app.harness.datasets import LoadedDataset, code_version, eval_dataset_load
from eval_app.harness.profiles import ProfilePlan, profile_specs_parse, profiles_plan
from eval_app.harness.types import (
    DEFAULT_DEPTH,
    DEFAULT_K_VALUES,
    EvalError,
    EvalSettings,
    ProfileUnavailable,
)
from eval_app.models import EvalCaseResult, EvalRun
from query_app.chat import chat_client_from_settings
from query_app.exceptions import OptionNotAllowed, QueryError
from query_app.services import options_admin_only

logger = logging.getLogger(__name__)

Progress = Callable[[EvalRun], None]


def _settings_for(run: EvalRun) -> EvalSettings:
    request = run.request
    return EvalSettings(
        k_values=tuple(run.k_values) or DEFAULT_K_VALUES,
        depth=run.depth,
        offline=run.offline,
        without_cross_encoder=bool(request.get("without_cross_encoder")),
        retrieval_only=bool(request.get("retrieval_only")),
        bootstrap_iterations=int(request.get("bootstrap_iterations", 2000)),
        seed=int(request.get("seed", 0)),
    )


def _load(run: EvalRun) -> LoadedDataset:
    request = run.request
    return eval_dataset_load(
        path=Path(run.dataset_path), beir=bool(request.get("beir")), limit=request.get("limit")
    )


def eval_run_create(
    *,
    dataset_path: Path | str,
    compare: str | Sequence[str],
    offline: bool = False,
    k_values: Sequence[int] = DEFAULT_K_VALUES,
    depth: int = DEFAULT_DEPTH,
    beir: bool = False,
    limit: int | None = None,
    without_cross_encoder: bool = False,
    retrieval_only: bool = False,
    baseline: EvalRun | None = None,
    user: User | AnonymousUser | None = None,
) -> EvalRun:
    """Check the dataset and the profiles, then store a queued run.

    Raises ``DatasetError`` (malformed dataset, with file and line), ``EvalError``
    (bad k or profile spec; ``ProfileUnavailable`` when no requested profile can
    run here) and the query app's ``UnknownProfile`` / ``UnknownOption`` /
    ``InvalidOption``, whose messages list the known names. Nothing is ingested
    or answered before these checks pass.
    """
    ks = tuple(sorted({int(k) for k in k_values}))
    if not ks or ks[0] < 1:
        raise EvalError(f"k values must be whole numbers of at least 1, got {list(k_values)}")
    if depth < 1:
        raise EvalError(f"the ranking depth must be at least 1, got {depth}")
    loaded = eval_dataset_load(path=Path(dataset_path), beir=beir, limit=limit)
    specs = profile_specs_parse(compare)
    if user is not None and not getattr(user, "is_superuser", False):
        # The same rule as for a question: models and prompts are administrators' settings.
        refused = sorted({name for spec in specs for name in options_admin_only(spec.overrides)})
        if refused:
            raise OptionNotAllowed(
                f"option {', '.join(map(repr, refused))} can be set by administrators only"
            )
    eval_settings = EvalSettings(
        k_values=ks, depth=depth, offline=offline, without_cross_encoder=without_cross_encoder
    )
    plan = profiles_plan(specs, settings=eval_settings)
    if not plan.runnable:
        reasons = "; ".join(f"{label}: {why}" for label, why in plan.unavailable.items())
        raise ProfileUnavailable(f"no requested profile can run here ({reasons})")
    dataset = loaded.dataset
    return EvalRun.objects.create(
        dataset_name=dataset.name,
        dataset_path=str(Path(dataset_path).absolute()),
        dataset_format=dataset.format,
        content_hash=dataset.content_hash,
        request={
            "compare": [s.label for s in specs],
            "beir": beir,
            "limit": limit,
            "without_cross_encoder": without_cross_encoder,
            "retrieval_only": retrieval_only,
        },
        profiles=plan.labels,
        options={p.label: p.snapshot() for p in plan.runnable},
        unavailable=plan.unavailable,
        code_version=code_version(),
        offline=offline,
        k_values=list(ks),
        depth=depth,
        pairs_total=len(dataset.cases) * len(plan.runnable),
        created_by=user if user is not None and user.is_authenticated else None,
        baseline=baseline,
    )


def eval_run_cancel(*, run: EvalRun) -> EvalRun:
    """Ask a run to stop after its current case; a queued run is cancelled at once."""
    EvalRun.objects.filter(pk=run.pk).update(cancel_requested=True)
    EvalRun.objects.filter(pk=run.pk, status=EvalRun.Status.QUEUED).update(
        status=EvalRun.Status.CANCELLED, finished_at=timezone.now()
    )
    run.refresh_from_db()
    return run


def _save_outcome(run: EvalRun, outcome: CaseOutcome) -> None:
    case = outcome.case
    EvalCaseResult.objects.update_or_create(
        run=run,
        profile=outcome.profile,
        case_id=case.id,
        defaults={
            "question": case.question,
            "tags": list(case.tags),
            "should_refuse": case.should_refuse,
            "relevant": case.grades,
            "expected": list(case.expected),
            "metrics": outcome.metrics,
            "retrieved": outcome.retrieved,
            "answer": outcome.answer,
            "mode": outcome.mode,
            "citations": outcome.citations,
            "refused": outcome.refused,
            "groundedness": outcome.groundedness,
            "failure_stage": outcome.failure_stage,
            "failure_detail": outcome.failure_detail,
            "latency_ms": outcome.latency_ms,
            "model_calls": outcome.model_calls,
            "trace": outcome.trace,
            "error": outcome.error,
        },
    )


def _cancel_requested(run: EvalRun) -> bool:
    return bool(
        EvalRun.objects.filter(pk=run.pk).values_list("cancel_requested", flat=True).first()
    )


def eval_run_summarise(*, run: EvalRun) -> EvalRun:
    """(Re)compute the run's aggregates, comparisons, failure stages and judges."""
    eval_settings = _settings_for(run)
    records = [ResultRecord.from_result(r) for r in run.results.all()]
    baseline_records = None
    baseline_info = None
    if run.baseline_id is not None and run.baseline is not None:
        baseline_records = [ResultRecord.from_result(r) for r in run.baseline.results.all()]
        baseline_info = {
            "run": run.baseline.pk,
            "same_data": run.baseline.content_hash == run.content_hash,
            "code_version": run.baseline.code_version,
        }
    summary = summarise(
        records,
        profiles=run.profiles,
        k_values=run.k_values,
        iterations=eval_settings.bootstrap_iterations,
        seed=eval_settings.seed,
        baseline=baseline_records,
        baseline_run=baseline_info,
    )
    run.aggregates = summary.aggregates
    run.failure_stages = summary.failure_stages
    run.judges = summary.judges
    run.comparisons = summary.comparisons
    run.save(update_fields=["aggregates", "failure_stages", "judges", "comparisons"])
    return run


def _finish(run: EvalRun, status: str, *, error: str = "") -> EvalRun:
    run.status = status
    run.error = error
    run.current = ""
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "error", "current", "finished_at"])
    return run


def eval_run_execute(*, run: EvalRun, on_progress: Progress | None = None) -> EvalRun:
    """Ingest the corpus, evaluate every (case, profile) pair, summarise; return the run.

    Expected problems (dataset changed into something invalid, a profile's model
    vanished, the collection's embedding model drifted) end the run ``failed`` with
    the message in ``run.error``; they are not raised. A finished run is returned
    as it is.
    """
    run.refresh_from_db()
    if run.is_finished:
        return run
    run.status = EvalRun.Status.RUNNING
    run.started_at = run.started_at or timezone.now()
    run.save(update_fields=["status", "started_at"])
    try:
        return _execute(run, on_progress)
    except (EvalError, DatasetError, IngestionError, QueryError) as exc:
        logger.warning("eval run %s failed: %s", run.pk, exc)
        return _finish(run, EvalRun.Status.FAILED, error=str(exc))
    except Exception as exc:
        logger.exception("eval run %s crashed", run.pk)
        _finish(run, EvalRun.Status.FAILED, error=f"unexpected error: {exc}")
        raise


def _execute(run: EvalRun, on_progress: Progress | None) -> EvalRun:
    eval_settings = _settings_for(run)
    loaded = _load(run)
    dataset = loaded.dataset
    plan: ProfilePlan = profiles_plan(
        profile_specs_parse(run.request.get("compare") or run.profiles), settings=eval_settings
    )
    runnable = [p for p in plan.runnable if p.label in run.profiles]
    if not runnable:
        raise ProfileUnavailable(
            "no profile of this run can run any more: "
            + "; ".join(f"{k}: {v}" for k, v in plan.unavailable.items())
        )
    collection = eval_collection_get_or_create(
        dataset_name=dataset.name, description=dataset.description
    )
    started = time.perf_counter()
    _progress(run, f"ingesting {len(loaded.files)} corpus files", on_progress)
    corpus = corpus_sync(
        collection=collection,
        files=loaded.files,
        approve_quarantined=dataset.quarantine == "approve",
    )
    ingest_s = time.perf_counter() - started
    run.collection = collection
    run.content_hash = dataset.content_hash
    run.ingestion = corpus.as_dict()
    run.unavailable = {**run.unavailable, **plan.unavailable}
    run.profiles = [p.label for p in runnable]
    run.pairs_total = len(dataset.cases) * len(runnable)
    run.save(
        update_fields=[
            "collection",
            "content_hash",
            "ingestion",
            "unavailable",
            "profiles",
            "pairs_total",
        ]
    )

    done = set(run.results.values_list("profile", "case_id"))
    principal = eval_principal()
    chat = None if eval_settings.offline else chat_client_from_settings()
    judge = Judge(checker="heuristic" if eval_settings.offline else "auto", chat=chat)
    cases_started = time.perf_counter()
    evaluated = 0
    cancelled = False
    try:
        for case in dataset.cases:
            if _cancel_requested(run):
                cancelled = True
                break
            for planned in runnable:
                if (planned.label, case.id) in done:
                    continue
                outcome = case_evaluate(
                    case=case,
                    planned=planned,
                    collection=collection,
                    principal=principal,
                    k_values=eval_settings.k_values,
                    judge=judge,
                    retrieval_only=eval_settings.retrieval_only,
                )
                _save_outcome(run, outcome)
                evaluated += 1
            run.pairs_done = run.results.count()
            EvalRun.objects.filter(pk=run.pk).update(
                pairs_done=run.pairs_done, current=f"case {case.id}"
            )
            run.current = f"case {case.id}"
            if on_progress is not None:
                on_progress(run)
    finally:
        close = getattr(chat, "close", None)
        if callable(close):
            close()
    cases_s = time.perf_counter() - cases_started
    summary_started = time.perf_counter()
    eval_run_summarise(run=run)
    run.timings = {
        "ingest_s": round(ingest_s, 3),
        "cases_s": round(cases_s, 3),
        "pairs_evaluated": evaluated,
        "per_pair_ms": round(1000 * cases_s / evaluated, 2) if evaluated else None,
        "summary_s": round(time.perf_counter() - summary_started, 3),
    }
    run.save(update_fields=["timings"])
    if cancelled:
        return _finish(run, EvalRun.Status.CANCELLED, error="cancelled on request")
    return _finish(run, EvalRun.Status.SUCCEEDED)


def _progress(run: EvalRun, message: str, on_progress: Progress | None) -> None:
    run.current = message
    EvalRun.objects.filter(pk=run.pk).update(current=message)
    if on_progress is not None:
        on_progress(run)


def eval_run_result_summary(run: EvalRun) -> dict[str, Any]:
    """The JSON report of a run (the CLI's ``--json`` output and the API's shape)."""
    return {
        "id": run.pk,
        "status": run.status,
        "error": run.error,
        "dataset": {
            "name": run.dataset_name,
            "path": run.dataset_path,
            "format": run.dataset_format,
            "content_hash": run.content_hash,
        },
        "code_version": run.code_version,
        "offline": run.offline,
        "retrieval_only": bool(run.request.get("retrieval_only")),
        "k_values": run.k_values,
        "depth": run.depth,
        "profiles": run.profiles,
        "options": run.options,
        "unavailable": run.unavailable,
        "ingestion": run.ingestion,
        "aggregates": run.aggregates,
        "comparisons": run.comparisons,
        "failure_stages": run.failure_stages,
        "judges": run.judges,
        "timings": run.timings,
        "progress": {"done": run.pairs_done, "total": run.pairs_total},
        "baseline": run.baseline_id,
        "created_at": run.created_at.isoformat() if run.created_at else None,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }
