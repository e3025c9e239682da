"""The judgements the corrective and adaptive graphs make, offline and with a chat model.

- ``triage``: chit-chat / unsafe / simple / complex (rules first, then the chat model);
- ``route``: none / single / iterative for the adaptive profile;
- ``grade``: correct / ambiguous / incorrect for the evidence, with a relevance per chunk;
- ``rewrite_probe``: a new retrieval probe across the vocabulary gap;
- ``decompose``: 1-3 sub-questions of a complex question.

Every chat-model judgement is one call with tolerant parsing; a failed call or a
reply that cannot be read falls back to the offline judgement and says so in a
warning (never an exception). Questions and passages are untrusted data in every
prompt (``data_block``).

One module per judgement (``triage.py``, ``decompose.py``, ``grade.py``,
``rewrite.py``); ``judgement.py`` holds what they share.
"""

from query_app.pipeline.corrective.decompose import (
    decompose,
    decompose_offline,
    part_words,
)
from query_app.pipeline.corrective.grade import (
    VERDICTS,
    Grade,
    chunk_relevance,
    grade,
    grade_offline,
    parse_grade,
    score_gate,
)
from query_app.pipeline.corrective.judgement import Judgement
from query_app.pipeline.corrective.rewrite import prf_terms, rewrite_offline, rewrite_probe
from query_app.pipeline.corrective.triage import (
    ROUTES,
    TRIAGE_LABELS,
    complexity,
    route,
    triage,
    triage_rules,
)

__all__ = [
    "ROUTES",
    "TRIAGE_LABELS",
    "VERDICTS",
    "Grade",
    "Judgement",
    "chunk_relevance",
    "complexity",
    "decompose",
    "decompose_offline",
    "grade",
    "grade_offline",
    "parse_grade",
    "part_words",
    "prf_terms",
    "rewrite_offline",
    "rewrite_probe",
    "route",
    "score_gate",
    "triage",
    "triage_rules",
]
