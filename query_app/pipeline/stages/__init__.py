"""The answering stages, one registry: ``STAGES.get(name)()`` is a fresh stage.

A profile lists the stages it runs (``profiles.PROFILES``); the runner loops over
them. A new stage is a module here with a ``Stage`` subclass registered below,
plus its test.
"""

from __future__ import annotations

from query_app.exceptions import UnknownStage
from query_app.pipeline.stages.assemble import AssembleStage
from query_app.pipeline.stages.base import MissingPart, PipelineState, Stage, StageCheck
from query_app.pipeline.stages.bridge import BridgeStage
from query_app.pipeline.stages.condense import CondenseStage
from query_app.pipeline.stages.decompose import DecomposeStage
from query_app.pipeline.stages.evaluate import EvaluateStage
from query_app.pipeline.stages.fuse import FuseStage
from query_app.pipeline.stages.generate import GenerateStage
from query_app.pipeline.stages.groundedness import GroundednessStage
from query_app.pipeline.stages.hops import HopsStage
from query_app.pipeline.stages.refine import RefineStage
from query_app.pipeline.stages.rerank import RerankStage, relevance_floor_check
from query_app.pipeline.stages.retrieve import RetrieveStage
from query_app.pipeline.stages.rewrite import RewriteStage
from query_app.pipeline.stages.transform import TransformStage
from query_app.pipeline.stages.triage import RespondStage, RouteStage, TriageStage
from query_app.pipeline.stages.web import WebStage
from ragsite.registry import Registry

STAGES: Registry[type[Stage]] = Registry("stage", unknown=UnknownStage)
for _stage in (
    CondenseStage,
    TransformStage,
    RetrieveStage,
    FuseStage,
    RerankStage,
    BridgeStage,
    AssembleStage,
    GenerateStage,
    GroundednessStage,
    # The corrective and adaptive graphs' nodes (query_app/pipeline/graph.py).
    TriageStage,
    RouteStage,
    RespondStage,
    DecomposeStage,
    HopsStage,
    EvaluateStage,
    RefineStage,
    RewriteStage,
    WebStage,
):
    STAGES.add(_stage.name, _stage)

__all__ = [
    "STAGES",
    "MissingPart",
    "PipelineState",
    "Stage",
    "StageCheck",
    "relevance_floor_check",
]
