"""The evaluation harness: run a golden dataset through profiles and score them.

Typical use (what the CLI, the Celery task and the benchmarks do)::

    run = eval_run_create(dataset_path="eval/golden/dataset.yaml",
                          compare="fast,balanced", offline=True)
    run = eval_run_execute(run=run)
    print(run_report_text(run))
    gate_evaluate(gate_load(Path("eval/golden/gate.yaml")), run).passed
"""

from eval_app.harness.gate import GateResult, GateSpec, gate_evaluate, gate_load
from eval_app.harness.report import run_report_text
from eval_app.harness.runner import (
    eval_run_cancel,
    eval_run_create,
    eval_run_execute,
    eval_run_result_summary,
    eval_run_summarise,
)
from eval_app.harness.types import (
    EvalError,
    GateFileError,
    ProfileSpec,
    ProfileUnavailable,
    UnknownMetric,
)

__all__ = [
    "EvalError",
    "GateFileError",
    "GateResult",
    "GateSpec",
    "ProfileSpec",
    "ProfileUnavailable",
    "UnknownMetric",
    "eval_run_cancel",
    "eval_run_create",
    "eval_run_execute",
    "eval_run_result_summary",
    "eval_run_summarise",
    "gate_evaluate",
    "gate_load",
    "run_report_text",
]
