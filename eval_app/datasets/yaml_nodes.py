"""Reading a composed YAML node tree while keeping every node's line number.

PyYAML's ``compose`` keeps the position of each node, which plain ``safe_load`` throws
away; reading the nodes directly lets every validation problem name its line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from eval_app.datasets.types import DatasetProblem

NULL_TAG = "tag:yaml.org,2002:null"


def node_line(node: Node) -> int:
    """The 1-based line a node starts on."""
    return int(node.start_mark.line) + 1


@dataclass
class MappingField:
    """One key of a mapping node with its value node."""

    key: str
    key_node: ScalarNode
    value: Node


class NodeReader:
    """Reads typed values from YAML nodes, collecting problems with their lines."""

    def __init__(self, path: Path, loader: yaml.SafeLoader) -> None:
        self.path = path
        self.loader = loader
        self.problems: list[DatasetProblem] = []

    def problem(
        self,
        node: Node | None,
        message: str,
        *,
        case_id: str | None = None,
        field: str | None = None,
    ) -> None:
        self.problems.append(
            DatasetProblem(
                path=self.path,
                message=message,
                line=node_line(node) if node is not None else None,
                case_id=case_id,
                field=field,
            )
        )

    def mapping(
        self,
        node: MappingNode,
        allowed: tuple[str, ...],
        *,
        what: str,
        case_id: str | None = None,
    ) -> dict[str, MappingField]:
        """The keys of a mapping node; unknown and duplicate keys become problems."""
        # Resolves "<<" merge keys the way PyYAML's own constructor would.
        self.loader.flatten_mapping(node)
        fields: dict[str, MappingField] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                self.problem(key_node, f"{what} keys must be plain names", case_id=case_id)
                continue
            key = key_node.value
            if key not in allowed:
                self.problem(
                    key_node,
                    f"unknown key {key!r} in {what}; allowed keys: {', '.join(allowed)}",
                    case_id=case_id,
                    field=key,
                )
                continue
            if key in fields:
                first = node_line(fields[key].key_node)
                self.problem(
                    key_node,
                    f"duplicate key (first given on line {first})",
                    case_id=case_id,
                    field=key,
                )
                continue
            fields[key] = MappingField(key=key, key_node=key_node, value=value_node)
        return fields

    def text(
        self,
        node: Node,
        *,
        field: str,
        case_id: str | None = None,
        required: bool = True,
    ) -> str | None:
        """A scalar as the text written (``8743`` stays "8743", ``1.10`` stays "1.10")."""
        if not isinstance(node, ScalarNode):
            self.problem(node, "must be a text value", case_id=case_id, field=field)
            return None
        value = "" if node.tag == NULL_TAG else node.value.strip()
        if required and not value:
            self.problem(node, "must not be empty", case_id=case_id, field=field)
            return None
        return value

    def text_list(self, node: Node, *, field: str, case_id: str | None) -> list[str]:
        """A list of scalars as text; null means an empty list."""
        if isinstance(node, ScalarNode) and node.tag == NULL_TAG:
            return []
        if not isinstance(node, SequenceNode):
            self.problem(node, "must be a list of text values", case_id=case_id, field=field)
            return []
        values = []
        for item in node.value:
            value = self.text(item, field=field, case_id=case_id)
            if value is not None:
                values.append(value)
        return values

    def boolean(self, node: Node, *, field: str, case_id: str | None) -> bool | None:
        """A YAML boolean (true/false, yes/no); anything else is a problem."""
        value = (
            self.loader.construct_object(node, deep=True) if isinstance(node, ScalarNode) else None
        )
        if not isinstance(value, bool):
            self.problem(node, "must be true or false", case_id=case_id, field=field)
            return None
        return value
