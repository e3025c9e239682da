"""Column values as Django's database cursor hands them to plain statements.

Django has psycopg return ``jsonb`` as its text (``JSONField`` parses it), and
pgvector's ``vector`` comes as its text form unless pgvector's own adapter is
registered. The search index's statements read both without model fields.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from pgvector import Vector


def jsonb_value(value: Any) -> Any:
    """A ``jsonb`` column's value: parsed from its text, or as given when already parsed."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def vector_value(value: Any) -> np.ndarray:
    """A ``vector`` column's value as a float32 array (from its text form or a sequence)."""
    if isinstance(value, str):
        value = Vector._from_db(value)
    return np.asarray(value, dtype=np.float32)
