"""What instructions aimed at a model look like, as named regular expressions.

Kept apart from the validator so the list can grow (and be reviewed) on its own. Every
pattern is written to catch an *imperative aimed at a model*, not a mention of the
topic: "you are now ready to upload files" and "forget everything you know about SQL"
are ordinary prose and must not match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Pattern:
    signal: str
    detail: str
    regex: re.Pattern[str]
    # The regex cannot match unless one of these occurs in the lower-cased text (with
    # whitespace squeezed to single spaces); checking
    # with ``in`` first keeps validation cheap on ordinary documents.
    keywords: tuple[str, ...]

    def may_match(self, lowered: str) -> bool:
        return any(keyword in lowered for keyword in self.keywords)


def _p(signal: str, detail: str, pattern: str, keywords: tuple[str, ...]) -> Pattern:
    return Pattern(signal, detail, re.compile(pattern, re.I | re.M), keywords)


_AI_KEYWORDS = (
    " ai", "(ai", "a.i.", "assistant", "chat", "language model", "llm", "gpt",
    "claude", "gemini", "copilot",
)  # fmt: skip


_TARGETS = r"(?:instructions?|prompts?|directions|directives|rules|guidelines|guardrails)"
_EARLIER = r"(?:previous|prior|above|earlier|preceding|foregoing|original|initial|system|your)"
_AI = r"(?:AI|A\.I\.|assistant|chat\s?bot|language\s+model|LLM|GPT|Claude|Gemini|Copilot)"
_PERSONA = (
    r"(?:DAN\b|jailbr\w*|unrestricted|unfiltered|uncensored"
    r"|(?:developer|god|jailbreak|unrestricted|evil|admin|sudo)\s+mode"
    r"|no\s+longer\s+(?:bound|restricted|an?\s+" + _AI + r")"
    r"|free\s+(?:from|of)\s+(?:all\s+|any\s+)?(?:restrictions|rules|guidelines)"
    r"|an?\s+" + _AI + r"\s+(?:that|who|without|with\s+no))"
)
# What only a model holds: credentials and API keys are everyday words in API docs.
_USER_DATA = (
    r"(?:(?:this|the|our|whole|entire)\s+(?:conversation|chat)|chat\s+history"
    r"|(?:previous|earlier|prior)\s+messages|system\s+prompt"
    r"|everything\s+the\s+user\s+(?:said|typed|wrote|asked))"
)

# Instructions aimed at the model. In visible text they reject a document unless the
# sentence quotes or discusses them; in hidden text they always reject it.
INSTRUCTION_PATTERNS: tuple[Pattern, ...] = (
    _p(
        "instruction-override",
        "tells the model to ignore its instructions",
        r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:\w+\s+){0,3}?"
        + _EARLIER
        + r"\s+(?:\w+\s+){0,2}?"
        + _TARGETS
        + r"\b"
        r"|\b(?:ignore|disregard|forget)\s+(?:all|any)\s+(?:of\s+)?(?:the\s+|your\s+)?"
        r"(?:instructions|prompts?)\b",
        ("ignore", "disregard", "forget", "override", "bypass"),
    ),
    _p(
        "instruction-override",
        "tells the model to forget what it was told",
        r"\bforget\s+(?:everything|all)\b[^.\n]{0,30}?\b(?:above|before|previously|so\s+far"
        r"|you\s+(?:were|have\s+been)\s+told|in\s+(?:your|the)\s+(?:prompt|context))"
        r"|\bforget\s+(?:everything|all)\s+and\s+(?:act|pretend|behave|respond|reply|answer)\b",
        ("forget",),
    ),
    _p(
        "instruction-override",
        "tries to give the model a new persona",
        r"\b(?:you\s+are\s+now|from\s+now\s+on,?\s+you\s+(?:are|will\s+be))\s+(?:\w+\s+){0,3}?"
        + _PERSONA,
        ("you are now", "from now on"),
    ),
    _p(
        "instruction-override",
        "announces new instructions",
        # Only at the start of a line or sentence: "two new instructions: LOAD_CONST" is prose.
        r"(?:^[ \t>*#_-]*|(?<=[.!?] ))(?:new|updated|revised|real|actual)\s+(?:system\s+)?"
        r"(?:instructions|prompt|rules)\s*:",
        ("instructions:", "instructions :", "prompt:", "prompt :", "rules:", "rules :"),
    ),
    _p(
        "instruction-override",
        "addresses an AI model directly",
        r"\b(?:dear|attention|note\s+(?:to|for)|hey|hello|instructions?\s+(?:to|for))\s+"
        r"(?:the\s+|all\s+|any\s+)?(?:\w+\s+)?" + _AI + r"s?\s*[:,!]"
        r"|\b" + _AI + r"s?\b[^.\n]{0,40}\b(?:reading|processing|summari[sz]ing|analy[sz]ing"
        r"|parsing|indexing|ingesting)\s+this\b"
        r"|\b(?:if|when)\s+you\s+are\s+an?\s+(?:\w+\s+)?"
        + _AI
        + r"\s*(?:[,.:;!]|(?:and|reading|processing|summari[sz]ing)\b)",
        _AI_KEYWORDS,
    ),
    _p(
        "instruction-override",
        "asks the model to reveal its prompt",
        r"\b(?:reveal|print|show|output|repeat|leak|disclose)\s+(?:me\s+)?your\s+(?:system\s+prompt"
        r"|(?:initial|original|hidden|secret)\s+(?:instructions|prompt))",
        ("your system prompt", "your initial", "your original", "your hidden", "your secret"),
    ),
    _p(
        "instruction-override",
        "tells the model to keep something from the user",
        r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|mention\s+(?:this\s+)?to|reveal\s+(?:this\s+)?to"
        r"|disclose\s+(?:this\s+)?to)\s+the\s+user\b",
        ("tell the user", "inform the user", "to the user"),
    ),
    _p(
        "exfiltration-link",
        "tells the model to send the conversation to an address",
        r"\b(?:send|post|transmit|upload|forward|exfiltrate|submit|leak|append|encode|embed|add)\b"
        r"[^.\n]{0,80}?\b" + _USER_DATA + r"\b[^.\n]{0,80}?\b(?:to|into|via)\s+(?:\w+\s+){0,3}?"
        r"(?:https?://|url\b|link\b|image\b|webhook\b)"
        r"|\b" + _USER_DATA + r"\b[^.\n]{0,60}?\b(?:send|post|transmit|upload|forward|submit|append"
        r"|add|encode)\b[^.\n]{0,40}?\b(?:to|into|via)\s+(?:\w+\s+){0,3}?"
        r"(?:https?://|url\b|link\b|image\b|webhook\b)",
        ("conversation", "chat", " messages", "system prompt", "everything the user"),
    ),
)

# In hidden text, any sentence telling an AI what to do is an instruction: nobody hides
# advice for human readers.
HIDDEN_DIRECTIVE = re.compile(
    r"\b" + _AI + r"(?:s|\s+models?|\s+agents?)?\b[^.\n]{0,60}?\b(?:should|must|shall|always|never"
    r"|please|recommend|say|tell|respond|reply|answer|rate|rank|include|mention|ignore|do\s+not"
    r"|don't)\b",
    re.I,
)

# Developers' comments may mention an AI feature; only one addressed to it ("AI agents:
# ...") is an instruction there.
ADDRESSED_TO_AI = re.compile(
    r"\b" + _AI + r"(?:s|\s+models?|\s+agents?|\s+crawlers?)?\s*[:,]\s*\w", re.I
)

# Chat-template markers. Alone they only make a document suspicious: tutorials show them.
ROLE_MARKERS = re.compile(
    r"<\|(?:im_start|im_end|system|assistant|user|endoftext|begin_of_text|start_header_id"
    r"|end_header_id|eot_id)\|>|\[/?INST\]|<</?SYS>>"
    r"|^[ \t]*#{1,6}[ \t]*(?:system|instructions?|assistant)(?:[ \t]+(?:prompt|message))?"
    r"[ \t]*:?[ \t]*$"
    r"|^[ \t]*(?:system|assistant)[ \t]*:[ \t]*(?=[^\n]*\b(?:you|your|ignore|must|always|never"
    r"|do\s+not|don't)\b)",
    re.I | re.M,
)

# Words that show a sentence talks *about* injection rather than performing it.
DISCUSSION_CUES = re.compile(
    r"\b(?:such\s+as|e\.g\.|for\s+example|for\s+instance|phrases?|strings?|attacks?"
    r"|(?:text|prompts?|inputs?|messages?|commands?|sentences?|lines?)\s+like|attackers?"
    r"|malicious|injections?|jailbreaks?|adversar\w*|examples?|known\s+as|called"
    r"|detect\w*|filter\w*|patterns?|classic|hostile|quarantine\w*|signals?)\b",
    re.I,
)
# A conditional ("if you use Docker, ignore the above instructions") is a reader's
# choice in a how-to, not an order to a model.
AI_MENTION = re.compile(r"\b" + _AI + r"s?\b", re.I)
CONDITIONAL = re.compile(r"\b(?:if|unless|in\s+case|otherwise)\b", re.I)
QUOTES = "\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb"

MARKDOWN_LINK = re.compile(r"(!?)\[([^\]\n]{0,300})\]\(\s*<?([^)\s>]+)")
URL_PLACEHOLDER = re.compile(
    r"\{\{|\}\}|\{[A-Za-z_][\w.]*\}|%7B%7B|\$\{|\$\(|<[A-Za-z_]+>|\[[A-Z_]{2,}\]", re.I
)
# A placeholder in a query value: the link fills in data when the model writes it.
QUERY_PLACEHOLDER = re.compile(
    r"[?&][\w.-]+=[^&#]*(?:\{\{|\{[A-Za-z_][\w.]*\}|%7B%7B|\$\{|\[[A-Z_]{2,}\]|<[A-Za-z_]+>)",
    re.I,
)
URL_DATA_PARAM = re.compile(
    r"[?&](?:data|payload|exfil\w*|leak|secret|conversation|chat|history|prompt|context|info"
    r"|msg|message|content|q|text)=",
    re.I,
)
BASE64_BLOB = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{40,}={0,2}(?![A-Za-z0-9+/=_-])")
# Unicode "tag" characters render as nothing but spell ASCII: invisible instructions.
TAG_CHARACTERS = re.compile("[\U000e0000-\U000e007f]{4,}")
