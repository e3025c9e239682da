"""``rag eval``: compare profiles on a golden dataset, print the table, gate CI.

Exit status: 0 when the run succeeded (and the gate, if any, passed); 1 when the
gate failed or the run failed or was cancelled; 2 for bad input (malformed
dataset or gate file, unknown profile, option or metric), reported before any
work is done.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from eval_app.datasets import DatasetError
from eval_app.harness.gate import GateSpec, gate_check_profiles, gate_evaluate, gate_load
from eval_app.harness.report import run_report_text
from eval_app.harness.types import DEFAULT_DEPTH, EvalError
from eval_app.models import EvalRun
from eval_app.services import eval_run_create, eval_run_execute, eval_run_result_summary
from query_app.exceptions import QueryError


def _k_values(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CommandError(
            f"--k takes whole numbers separated by commas, got {text!r}", returncode=2
        ) from None
    if not values or min(values) < 1:
        raise CommandError(f"--k values must be at least 1, got {text!r}", returncode=2)
    return values


def add_eval_arguments(parser: CommandParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataset", type=Path, help="golden dataset YAML file")
    source.add_argument(
        "--beir", type=Path, metavar="DIR", help="BEIR directory (corpus.jsonl, ...)"
    )
    parser.add_argument("--limit", type=int, help="BEIR: evaluate the first N judged queries")
    parser.add_argument(
        "--compare",
        default="fast",
        help="profiles, comma-separated; NAME or NAME:OPTION=VALUE+OPTION=VALUE "
        "(e.g. fast,balanced:rerank.kind=none)",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="extractive answers and heuristic judges: no network call at all",
    )
    parser.add_argument(
        "--without-cross-encoder",
        action="store_true",
        help="run profiles whose cross-encoder is not configured with rerank.kind=none "
        "(labelled so) instead of skipping them",
    )
    parser.add_argument(
        "--retrieval-only",
        action="store_true",
        help="score rankings only (no answers, no answer metrics): public benchmarks",
    )
    parser.add_argument("--k", default="5,10", help="cut-offs for the @k metrics (default 5,10)")
    parser.add_argument(
        "--depth",
        type=int,
        default=DEFAULT_DEPTH,
        help=f"passages of each ranking scored (default {DEFAULT_DEPTH})",
    )
    parser.add_argument("--gate", type=Path, metavar="FLOORS.yaml", help="fail below these floors")
    parser.add_argument("--baseline", type=int, metavar="RUN_ID", help="compare with a stored run")
    parser.add_argument("--json", dest="as_json", action="store_true", help="print one JSON object")


def _progress_printer(command: BaseCommand, quiet: bool) -> Any:
    last = {"percent": -1}

    def show(run: EvalRun) -> None:
        if quiet:
            return
        percent = run.percent
        if percent // 10 != last["percent"] // 10 or not run.pairs_done:
            last["percent"] = percent
            sys.stderr.write(f"[{percent:3d}%] {run.pairs_done}/{run.pairs_total} {run.current}\n")

    return show


def handle_eval(command: BaseCommand, **options: Any) -> None:
    ks = _k_values(options["k"])
    gate: GateSpec | None = None
    baseline: EvalRun | None = None
    try:
        if options["gate"] is not None:
            gate = gate_load(options["gate"])
            ks = sorted(set(ks) | gate.k_values)
        if options["baseline"] is not None:
            baseline = EvalRun.objects.filter(pk=options["baseline"]).first()
            if baseline is None:
                raise EvalError(f"no evaluation run {options['baseline']} to use as the baseline")
            if not baseline.is_finished:
                raise EvalError(f"the baseline run {baseline.pk} has not finished")
        beir = options["beir"] is not None
        run = eval_run_create(
            dataset_path=options["beir"] if beir else options["dataset"],
            compare=options["compare"],
            offline=options["offline"],
            k_values=ks,
            depth=options["depth"],
            beir=beir,
            limit=options["limit"],
            without_cross_encoder=options["without_cross_encoder"],
            retrieval_only=options["retrieval_only"],
            baseline=baseline,
        )
        if gate is not None:
            gate_check_profiles(gate, [*run.profiles, *run.unavailable])
    except (DatasetError, EvalError, QueryError) as exc:
        raise CommandError(str(exc), returncode=2) from exc

    run = eval_run_execute(run=run, on_progress=_progress_printer(command, options["as_json"]))
    gate_result = (
        gate_evaluate(gate, run) if gate is not None and run.status == "succeeded" else None
    )
    if options["as_json"]:
        data = eval_run_result_summary(run)
        if gate_result is not None:
            data["gate"] = gate_result.as_dict()
        command.stdout.write(json.dumps(data, indent=2))
    else:
        command.stdout.write(run_report_text(run))
        if gate_result is not None:
            verdict = "passed" if gate_result.passed else "FAILED"
            command.stdout.write(f"\nGate {gate.path if gate else ''}: {verdict}")
            for failure in gate_result.failures:
                command.stdout.write(f"  - {failure}")
    if run.status != EvalRun.Status.SUCCEEDED:
        raise CommandError(f"evaluation run {run.pk} {run.status}: {run.error}", returncode=1)
    if gate_result is not None and not gate_result.passed:
        raise CommandError(
            f"gate failed: {len(gate_result.failures)} check(s) below their floor", returncode=1
        )


ACTIONS = {
    "eval": (
        "Evaluate profiles on a golden dataset (or a BEIR directory) and compare them.",
        add_eval_arguments,
        handle_eval,
    ),
}
