"""``rag query|retrieve --json`` and the API's query/retrieve answer with one shape: QueryRun.

Both are checked against the schema's ``QueryRun`` component, the one the API's
two operations declare for their 200 answer.
"""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import jsonschema
import pytest
from django.core.management import call_command

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_chat_model")]

QUESTION = "What does error ERR-4471 from the installer mean?"


def _json_schema(node: Any) -> Any:
    """OpenAPI 3.0's ``nullable`` in JSON Schema's words (a null is one more type)."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: _json_schema(value) for key, value in node.items() if key != "nullable"}
    if node.get("nullable"):
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


def query_run_validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    root = {
        "$ref": "#/components/schemas/QueryRun",
        "components": _json_schema(schema["components"]),
    }
    return jsonschema.Draft202012Validator(root)


@pytest.mark.parametrize("action", ["query", "retrieve"])
def test_the_cli_json_and_the_api_answer_match_the_one_query_run_component(api, ingested, action):
    schema = api.get("/api/schema/?format=json").json()
    operation = schema["paths"][f"/api/collections/{{slug}}/{action}"]["post"]
    declared = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert declared == {"$ref": "#/components/schemas/QueryRun"}
    component = schema["components"]["schemas"]["QueryRun"]
    validator = query_run_validator(schema)

    response = api.post(f"/api/collections/docs/{action}", {"question": QUESTION}, format="json")
    assert response.status_code == 200, response.content
    out = StringIO()
    call_command("rag", action, QUESTION, "--collection", "docs", "--json", stdout=out)
    printed = json.loads(out.getvalue())

    for payload in (response.json(), printed):
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(payload)]
        assert not errors, errors
        # The same keys, every one the component names: neither side has one of its own.
        assert set(payload) == set(component["properties"]) == set(component["required"])
    assert printed["retrieval_only"] is response.json()["retrieval_only"] is (action == "retrieve")
    assert [c["chunk_id"] for c in printed["citations"]] == [
        c["chunk_id"] for c in response.json()["citations"]
    ]
