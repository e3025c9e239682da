"""Evaluation services: create, execute, cancel and enqueue runs.

The work is done by the harness (``eval_app.harness``); this module is the
entry point views, tasks and the CLI call.
"""

from __future__ import annotations

from eval_app.harness.runner import (
    eval_run_cancel,
    eval_run_create,
    eval_run_execute,
    eval_run_result_summary,
    eval_run_summarise,
)
from eval_app.models import EvalRun

__all__ = [
    "eval_run_cancel",
    "eval_run_create",
    "eval_run_enqueue",
    "eval_run_execute",
    "eval_run_result_summary",
    "eval_run_summarise",
]


def eval_run_enqueue(*, run: EvalRun) -> EvalRun:
    """Execute the (queued) run on a worker once the current transaction commits."""
    from eval_app.tasks import eval_run_task

    eval_run_task.delay_on_commit(run.pk)
    return run
