"""Answering services: validate a question, run the pipeline, store the run.

``query_answer`` is what the REST API, the CLI and evaluation call;
``query_answer_stream`` is the same for the browser, yielding events as the
stages finish and the answer streams. Both check the caller's read
permission, validate the input before any work (specific exceptions from
``query_app.exceptions`` with messages fit for users) and store a ``QueryRun``.

``prepare.py`` checks and resolves a request, ``answer.py`` runs and stores it,
``evaluation.py`` serves callers outside the pipeline.
"""

from query_app.exceptions import ConfigurationError
from query_app.pipeline.options import QueryLimits, QueryOptions
from query_app.pipeline.profiles import options_admin_only, profile_names
from query_app.pipeline.stages import MissingPart
from query_app.services.answer import (
    QueryEvent,
    RunEvent,
    query_answer,
    query_answer_stream,
    query_retrieve,
    query_run_rerun,
)
from query_app.services.evaluation import (
    GroundednessVerdict,
    JudgedPassage,
    ProfileNeeds,
    answer_markers,
    groundedness_judge,
    profile_needs,
    profile_resolve,
)
from query_app.services.prepare import QueryRequest, User, query_prepare, question_validate

__all__ = [
    "ConfigurationError",
    "GroundednessVerdict",
    "JudgedPassage",
    "MissingPart",
    "ProfileNeeds",
    "QueryEvent",
    "QueryLimits",
    "QueryOptions",
    "QueryRequest",
    "RunEvent",
    "User",
    "answer_markers",
    "groundedness_judge",
    "options_admin_only",
    "profile_names",
    "profile_needs",
    "profile_resolve",
    "query_answer",
    "query_answer_stream",
    "query_prepare",
    "query_retrieve",
    "query_run_rerun",
    "question_validate",
]
