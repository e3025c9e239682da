"""What every judgement shares: the :class:`Judgement` it returns, and one chat-model
call with a fallback warning instead of an exception, read tolerantly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from query_app.chat import ChatClient, ChatError


@dataclass
class Judgement:
    """A label with its reason, who judged it, and any fallback warning."""

    label: str
    reason: str
    source: str  # rules | heuristic | llm
    warnings: list[str] = field(default_factory=list)
    model_calls: int = 0


def ask_chat(
    chat: ChatClient,
    messages: list[dict[str, str]],
    *,
    max_tokens: int,
    what: str,
    fallback: str = "used rules",
) -> tuple[str | None, str]:
    """The chat model's reply, or None and a warning saying what ``fallback`` was taken."""
    try:
        return chat.complete(messages, temperature=0.0, max_tokens=max_tokens), ""
    except ChatError as exc:
        return None, f"the chat model {chat.name} failed during {what} ({exc}); {fallback}"


def first_label(text: str, labels: Sequence[str]) -> str:
    """The first of ``labels`` that ``text`` names as a word, or ""."""
    found = re.search(r"\b(" + "|".join(re.escape(x) for x in labels) + r")\b", text.lower())
    return found.group(1) if found else ""


def short_reply(reply: str | None) -> str:
    """The start of an unusable reply, as a warning quotes it."""
    if not reply or not reply.strip():
        return "empty reply"
    text = " ".join(reply.split())
    return repr(text[:60] + ("…" if len(text) > 60 else ""))


def clamp(value: float) -> float:
    """``value`` held to 0..1."""
    return max(0.0, min(1.0, value))
