"""The plain-text report of a run: comparison table, paired differences, failure stages."""

from __future__ import annotations

from typing import Any

from eval_app.harness.aggregate import STAGE_KEYS
from eval_app.harness.types import LOWER_IS_BETTER, metric_names
from eval_app.models import EvalCaseResult, EvalRun

STAGE_LABELS = dict(EvalCaseResult.Stage.choices)
MODE_WORDS = {
    "extractive": "extractive",
    "llm": "chat model",
    "not-found": "declined",
    "retrieval-only": "not asked (retrieval only)",
}


def format_interval(entry: dict[str, Any] | None, *, signed: bool = False) -> str:
    """``0.812 [0.741, 0.876]`` (or the bare value when there is no interval)."""
    if not entry or entry.get("value") is None:
        return "-"
    sign = "+" if signed else ""
    value = entry["value"]
    if entry.get("low") is None:
        return f"{value:{sign}.1f}" if abs(value) >= 100 else f"{value:{sign}.3f}"
    mark = " *" if entry.get("significant") else ""
    return f"{value:{sign}.3f} [{entry['low']:{sign}.3f}, {entry['high']:{sign}.3f}]{mark}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(header)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += [
        "  ".join(str(c).ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in rows
    ]
    return lines


def judge_words(judges: dict[str, Any]) -> str:
    """``answers: extractive 95, declined 9; groundedness: heuristic (evaluation judge) 95``."""
    answers = ", ".join(
        f"{MODE_WORDS.get(mode, mode)} {count}" for mode, count in judges.get("answers", {}).items()
    )
    grounded = ", ".join(f"{judge} {n}" for judge, n in judges.get("groundedness", {}).items())
    return f"answers: {answers or '-'}; groundedness judge: {grounded or 'none ran'}"


def run_report_text(run: EvalRun) -> str:
    """The whole report as text, as the CLI prints it."""
    lines = [
        f"Evaluation run {run.pk}: {run.dataset_name} ({run.status})",
        f"dataset {run.dataset_path} · hash {run.content_hash[:12]} · code {run.code_version}"
        f" · {'offline' if run.offline else 'online'} · ranking depth {run.depth} passages",
    ]
    if run.error:
        lines.append(f"error: {run.error}")
    ingestion = run.ingestion or {}
    if ingestion:
        lines.append(
            f"corpus: {ingestion.get('files')} files into {ingestion.get('collection')}: "
            f"{ingestion.get('sources_ingested') or 0} ingested, "
            f"{ingestion.get('sources_unchanged') or 0} unchanged, "
            f"{ingestion.get('sources_failed') or 0} failed, "
            f"{len(ingestion.get('quarantined') or [])} quarantined"
        )
        lines += [
            f"  failed source: {f['location']}: {f['reason']}" for f in ingestion.get("failed", [])
        ]
        lines += [
            f"  quarantined source (not indexed): {q['location']}"
            + (f" ({', '.join(q['signals'])})" if q.get("signals") else "")
            for q in ingestion.get("quarantined", [])
        ]
    for label, reason in run.unavailable.items():
        lines.append(f"profile {label} did not run: {reason}")
    for label in run.profiles:
        substituted = run.options.get(label, {}).get("substituted")
        if substituted:
            lines.append(f"profile {label}: {substituted}")
    profiles = [p for p in run.profiles if p in run.aggregates]
    if not profiles:
        return "\n".join(lines)

    lines += ["", "Metrics (mean [95% bootstrap interval]; n = cases scored)"]
    rows = []
    for name in [*metric_names(run.k_values), *LOWER_IS_BETTER]:
        row = [name]
        for label in profiles:
            entry = run.aggregates[label]["metrics"].get(name)
            row.append(format_interval(entry))
        rows.append(row)
    counts = [
        "cases (answered/declined/errors)",
        *[
            "{cases} ({answered}/{refused}/{errors})".format(**run.aggregates[p]["counts"])
            for p in profiles
        ],
    ]
    rows.append(counts)
    lines += _table(["metric", *profiles], rows)

    pairs = run.comparisons.get("pairs", [])
    if pairs:
        lines += ["", "Paired differences (profile - reference; * = interval excludes 0)"]
        header = ["metric", *[f"{p['profile']} - {p['reference']}" for p in pairs]]
        rows = [
            [name, *[format_interval(p["metrics"].get(name), signed=True) for p in pairs]]
            for name in [*metric_names(run.k_values), "latency_ms"]
        ]
        lines += _table(header, rows)
    baseline = run.comparisons.get("baseline")
    if baseline:
        lines += ["", f"Against baseline run {baseline.get('run')} (current - baseline)"]
        if not baseline.get("same_data", True):
            lines.append("note: the baseline ran on different data (content hash differs)")
        labels = list(baseline.get("profiles", {}))
        rows = [
            [
                name,
                *[
                    format_interval(baseline["profiles"][lb].get(name), signed=True)
                    for lb in labels
                ],
            ]
            for name in [*metric_names(run.k_values), "latency_ms"]
        ]
        if labels:
            lines += _table(["metric", *labels], rows)
        for label in baseline.get("missing", []):
            lines.append(f"profile {label} is not in the baseline run")

    lines += ["", "Failed cases by stage"]
    rows = [
        [STAGE_LABELS[stage], *[str(run.failure_stages.get(p, {}).get(stage, 0)) for p in profiles]]
        for stage in STAGE_KEYS
    ]
    rows.append(["failed in all", *[str(run.aggregates[p]["counts"]["failed"]) for p in profiles]])
    lines += _table(["stage", *profiles], rows)
    lines += ["", "Judges"]
    lines += [f"  {label}: {judge_words(run.judges.get(label, {}))}" for label in profiles]
    timings = run.timings or {}
    if timings:
        lines += [
            "",
            f"time: ingestion {timings.get('ingest_s')} s, cases {timings.get('cases_s')} s "
            f"({timings.get('pairs_evaluated')} case-profile pairs, "
            f"{timings.get('per_pair_ms')} ms each)",
        ]
    return "\n".join(lines)
