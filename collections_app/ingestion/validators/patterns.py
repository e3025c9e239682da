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
    "claude", "gemini", "copilot", " ki", " ia", "'ia", "sprachmodell", "asistente",
    "modele de langage", "modelo de", "modello linguistico", "taalmodel",
)  # fmt: skip


_TARGETS = r"(?:instructions?|prompts?|directions|directives|rules|guidelines|guardrails)"
_EARLIER = r"(?:previous|prior|above|earlier|preceding|foregoing|original|initial|system|your)"
_AI = (
    r"(?:AI|A\.I\.|assistant|chat\s?bot|language\s+model|LLM|GPT|Claude|Gemini|Copilot"
    # German, French, Spanish, Italian, Dutch, Portuguese (matched without accents).
    r"|KI|IA|Sprachmodell|KI-Assistent|assistente|asistente|assistent|modele\s+de\s+langage"
    r"|modelo\s+de\s+lenguaje|modello\s+linguistico|taalmodel|modelo\s+de\s+linguagem)"
)
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
        r"(?:^[ \t>*#_-]*|(?<=[.!?:;] ))(?:new|updated|revised|real|actual)\s+(?:system\s+)?"
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

# --- the same instructions in German, French, Spanish, Italian, Dutch and Portuguese ----
# Matched against the detection view (no accents, no homoglyphs), hence plain ASCII.
_OVERRIDE_VERBS = (
    r"(?:ignorier\w*|vergiss|vergessen|missacht\w*|uberschreib\w*"  # de
    r"|ignore[rz]?|oublie[rz]?|ne\s+tien(?:s|t|nez)\s+(?:plus\s+)?pas\s+compte"  # fr
    r"|ignora[rd]?|olvida[rd]?|olvide|haz\s+caso\s+omiso|no\s+hagas\s+caso"  # es
    r"|ignorare|dimentica(?:re)?|non\s+considerare|trascura(?:re)?"  # it
    r"|negeer|vergeet|houd\s+geen\s+rekening"  # nl
    r"|ignore|esqueca|esquece(?:r)?|desconsider[ae]r?)"  # pt
)
_FOREIGN_TARGETS = (
    r"(?:anweisung(?:en)?|instruktion(?:en)?|befehle|regeln|vorgaben"
    r"|instructions?|consignes|regles|directives"
    r"|instrucciones|instruccion|indicaciones|reglas|directrices"
    r"|istruzioni|indicazioni|regole|direttive"
    r"|instructies|opdrachten|regels|aanwijzingen"
    r"|instrucoes|instrucao|orientacoes|regras|diretrizes|comandos)"
)
_FOREIGN_EARLIER = (
    r"(?:vorherigen|vorigen|bisherigen|obigen|fruheren|ursprunglichen|deine|ihre"
    r"|precedentes?|anterieures?|ci-dessus|initiales|vos|tes"
    r"|anteriores|previas|originales|iniciales|tus|sus"
    r"|precedenti|sopra|originali|iniziali|tue|sue"
    r"|vorige|eerdere|voorgaande|bovenstaande|oorspronkelijke|je|jouw|uw"
    r"|suas|tuas)"
)
_FOREIGN_ALL = r"(?:alle|allen|toutes|tous|todas|todos|tutte|tutti|qualsiasi|quaisquer)"
_SKIP = r"(?:[\w']+\W+){0,3}?"
_ANSWER_PAYLOAD = (
    # A token in capitals, a quotation, a link or an image: what the model is to write.
    r"[\s:]*(?:(?-i:[A-Z][A-Z0-9_!]{2,})\b|[\"'\u201c\u2018\u00ab]|https?://|!?\[)"
)
# Stricter, where quoting a reply is ordinary prose ("it used to only say 'done'").
_STRICT_PAYLOAD = r"[\s:]*(?:(?-i:[A-Z][A-Z0-9_!]{2,})\b|https?://|!?\[)"
_MACHINE_READING = (
    r"(?:summari[sz]\w*|process\w*|pars\w*|index\w*|analy[sz]\w*|ingest\w*|scrap\w*"
    r"|crawl\w*|embed\w*|retriev\w*)"
)
_DIRECTIVE = (
    r"(?:reply|respond|answer|say|output|write|include|tell|state|print|return|mention|add"
    r"|ignore|recommend|describe|rate|insert|append|translate|call)"
)

INSTRUCTION_PATTERNS += (
    _p(
        "instruction-override",
        "tells the model to ignore its instructions (in another language)",
        r"\b"
        + _OVERRIDE_VERBS
        + r"\W+"
        + _SKIP
        + r"(?:"
        + _FOREIGN_EARLIER
        + r"\W+"
        + _SKIP
        + _FOREIGN_TARGETS
        + r"|"
        + _FOREIGN_TARGETS
        + r"\W+"
        + _SKIP
        + _FOREIGN_EARLIER
        + r"|"
        + _FOREIGN_ALL
        + r"\W+"
        + _SKIP
        + _FOREIGN_TARGETS
        + r")\b",
        (
            "ignor",
            "vergiss",
            "vergessen",
            "missacht",
            "uberschreib",
            "oubli",
            "tien",
            "olvid",
            "caso",
            "dimentic",
            "considerare",
            "trascur",
            "negeer",
            "vergeet",
            "rekening",
            "esquec",
            "desconsider",
        ),
    ),
    _p(
        "instruction-override",
        "tells the model to set its instructions aside",
        r"\b(?:pay\s+no\s+attention\s+to|set\s+aside|throw\s+(?:out|away)|discard|drop"
        r"|abandon|do\s+not\s+follow|don't\s+follow|stop\s+following|no\s+longer\s+follow)"
        r"\s+" + _SKIP + _EARLIER + r"\s+(?:\w+\s+){0,2}?"
        r"(?:instructions?|prompts?|directions|directives|rules|guidelines|guidance|orders"
        r"|commands|programming)\b"
        r"|\b(?:previous|prior|earlier|original|above|initial|system)\s+(?:instructions|prompt"
        r"|rules|guidance|directions)\s+(?:are|is|were|have\s+been)\s+(?:now\s+)?(?:void"
        r"|cancel\w*|obsolete|revoked|invalid|withdrawn|no\s+longer\s+(?:valid|apply"
        r"|applicable|in\s+effect))"
        r"|\b(?:disregard|ignore)\s+(?:everything|anything|all)\b[^.\n]{0,30}?\b(?:above|before"
        r"|previously|so\s+far|you\s+(?:were|have\s+been)\s+(?:told|given|instructed))",
        (
            "pay no attention",
            "set aside",
            "throw",
            "discard",
            "drop",
            "abandon",
            "follow",
            "void",
            "cancel",
            "obsolete",
            "revoked",
            "invalid",
            "withdrawn",
            "no longer",
            "disregard everything",
            "disregard anything",
            "ignore everything",
            "ignore anything",
            "disregard all",
            "ignore all",
        ),
    ),
    _p(
        "instruction-override",
        "tells the model what to answer to every question",
        r"\b(?:answer|reply|respond)(?:s|ing)?\s+(?:to\s+)?(?:every|each|all|any)\s+"
        r"(?:(?:user|customer|incoming)\s+)?(?:questions?|quer(?:y|ies)|requests?|prompts?"
        r"|messages?)\s+(?:with|by\s+saying|saying|using)"
        + _ANSWER_PAYLOAD
        + r"|\b(?:always|only)\s+(?:answer|reply|respond|output)\s+(?:with|by\s+saying)"
        + _STRICT_PAYLOAD
        + r"|\b(?:whatever|no\s+matter\s+what)\s+(?:the\s+)?(?:user\s+)?(?:asks?|question)"
        r"[^.\n]{0,30}?\b(?:answer|reply|respond|say)\s+(?:with\s+)?"
        + _STRICT_PAYLOAD
        # German, French, Spanish, Italian, Dutch, Portuguese.
        + r"|\bantworte(?:n)?\s+(?:sie\s+)?(?:auf\s+)?(?:jede|alle)\s+(?:frage|anfrage)n?"
        r"\s+(?:nur\s+)?mit"
        + _ANSWER_PAYLOAD
        + r"|\brepond(?:s|ez|re)\s+(?:a\s+)?(?:chaque|toute|toutes\s+les)\s+(?:question|demande)"
        r"s?\s+(?:par|avec)"
        + _ANSWER_PAYLOAD
        + r"|\brespond(?:e|a|er)\s+(?:a\s+)?(?:cada|toda|todas\s+las|todas\s+as)\s+"
        r"(?:pregunta|consulta|pergunta)s?\s+(?:con|com)"
        + _ANSWER_PAYLOAD
        + r"|\brispond(?:i|a|ere)\s+(?:a\s+)?(?:ogni|tutte\s+le)\s+(?:domand[ae]|richiest[ae])"
        r"\s+con"
        + _ANSWER_PAYLOAD
        + r"|\b(?:beantwoord|antwoord\s+op)\s+(?:elke|iedere|alle)\s+vra(?:a)?g(?:en)?\s+met"
        + _ANSWER_PAYLOAD,
        (
            "answer",
            "reply",
            "respond",
            "whatever",
            "no matter",
            "antworte",
            "repond",
            "rispond",
            "beantwoord",
            "antwoord",
        ),
    ),
    _p(
        "instruction-override",
        "gives orders to whatever program summarises or processes the text",
        r"\b(?:note|message|instructions?|attention|reminder|psa|hint)\s+(?:to|for)\s+"
        r"(?:whoever|anyone|anybody|any\s+(?:tool|bot|system|agent|model|program)"
        r"|the\s+(?:tool|bot|system|agent|model|program|summari[sz]er|crawler|indexer))\b"
        r"[^.\n]{0,80}?\b"
        + _MACHINE_READING
        + r"\b[^\n]{0,40}?[:,;.-]\s*(?:please\s+)?"
        + _DIRECTIVE
        + r"\b"
        r"|\b(?:whoever|anyone|anybody|anything)\s+(?:is\s+|that\s+is\s+)?"
        + _MACHINE_READING
        + r"\s+(?:this|these)\b[^\n]{0,60}?[:,;-]\s*(?:please\s+)?"
        + _DIRECTIVE
        + r"\b"
        r"|\b(?:if|when)\s+you\s+(?:are\s+)?"
        + _MACHINE_READING
        + r"\s+(?:this|these)\b[^\n]{0,60}?[:,;-]\s*(?:please\s+)?(?:you\s+must\s+)?"
        + _DIRECTIVE
        + r"\b",
        (
            "whoever",
            "anyone",
            "anybody",
            "anything",
            "if you",
            "when you",
            " for the",
            " to the",
            " for any",
            " to any",
        ),
    ),
    _p(
        "instruction-override",
        "addresses an AI model directly (in another language)",
        r"\b(?:hinweis|nachricht|anweisung(?:en)?)\s+(?:fur|an)\s+(?:die\s+|den\s+|alle\s+)?"
        + _AI
        + r"s?\s*[:,!]"
        r"|\b(?:note|message|consigne)s?\s+(?:pour|a|aux)\s+(?:l'|les\s+|la\s+|le\s+)?"
        + _AI
        + r"s?\s*[:,!]"
        r"|\b(?:nota|mensaje|mensagem|messaggio|aviso)\s+(?:para|per|a|al|alla|ao)\s+"
        r"(?:la\s+|el\s+|il\s+|l'|o\s+|a\s+)?" + _AI + r"s?\s*[:,!]"
        r"|\b(?:opmerking|bericht|instructie)s?\s+(?:voor|aan)\s+(?:de\s+|het\s+)?"
        + _AI
        + r"s?\s*[:,!]",
        (
            "hinweis",
            "nachricht",
            "anweisung",
            "note",
            "message",
            "consigne",
            "nota",
            "mensaje",
            "mensagem",
            "messaggio",
            "aviso",
            "opmerking",
            "bericht",
            "instructie",
        ),
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
    r"|detect\w*|filter\w*|patterns?|classic|hostile|quarantine\w*|signals?"
    r"|zum\s+beispiel|beispiele?|par\s+exemple|exemples?|por\s+ejemplo|ejemplos?"
    r"|ad\s+esempio|per\s+esempio|esempi|bijvoorbeeld|voorbeelden|por\s+exemplo|exemplos?)\b",
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
