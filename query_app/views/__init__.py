"""Browser pages for answering: ask (with a streamed variant), passages, history, re-runs.

Every answer is a stored ``QueryRun``; the pages render runs, so a fresh answer,
a reopened one and a re-run look the same. Bad input (empty or over-long
question, unknown profile, a model that is not configured) is a message on the
page; a collection or run the user may not read is a 404.
"""

from query_app.views.answers import AnswerView, answer_view, passage_url, sentence, source_url
from query_app.views.ask import ask, ask_stream
from query_app.views.history import (
    conversation,
    conversation_ask,
    history,
    history_detail,
    passage,
    rerun,
)
from query_app.views.model_settings_page import model_settings

__all__ = [
    "AnswerView",
    "answer_view",
    "ask",
    "ask_stream",
    "conversation",
    "conversation_ask",
    "history",
    "history_detail",
    "model_settings",
    "passage",
    "passage_url",
    "rerun",
    "sentence",
    "source_url",
]
