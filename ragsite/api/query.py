"""Ask a collection (answer or retrieval only) and reopen stored query runs."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from query_app.models import QueryRun
from query_app.pipeline.profiles import PROFILES
from query_app.presentation import citation_shown
from query_app.selectors import query_run_get_for_user, query_runs_for_user
from query_app.services import QueryRequest, query_answer
from ragsite.api.access import collection_and_role_for, collection_for
from ragsite.api.fields import (
    OverridesField,
    QuestionField,
    RegistryNameField,
    StrictJsonSerializer,
    TopNField,
)

TAG = ["query"]


def run_payload(run: QueryRun) -> dict[str, Any]:
    """The stored run as the API shows it: citations never carry a server's full path."""
    payload = run.as_payload()
    payload["citations"] = [citation_shown(c) for c in payload["citations"]]
    return payload


# Its request component is "QueryRequest" (request components get the suffix).
@extend_schema_serializer(component_name="Query")
class QueryRequestSerializer(StrictJsonSerializer):
    # Emptiness and the length limit are checked by the answering service, so
    # the API, the CLI and the browser give the same message.
    question = QuestionField(error_messages={"required": "send a question"})
    profile = RegistryNameField(
        names=lambda: PROFILES,
        required=False,
        allow_blank=True,
        default="",
        help_text="The answering profile; empty: the deployment's default "
        '(settings RAG["profile"], fast unless set).',
    )
    top_n = TopNField(required=False, default=None, help_text="How many passages to cite.")
    overrides = OverridesField(required=False, default=dict)
    web_fallback = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Search the web when the collection's evidence stays insufficient "
        "(corrective and adaptive profiles, on a collection that allows it; 400 otherwise). "
        "Web passages are cited with their URL as `source`, a `web:` chunk id and source_id "
        "0, and are never stored in the collection.",
    )
    allow_fallback = serializers.BooleanField(
        required=False,
        default=True,
        help_text="When the chat model fails, answer extractively (with a trace warning) "
        "instead of failing with 502.",
    )
    conversation = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=2**31 - 1,
        help_text="Ask a follow-up in this conversation (the `conversation` of an earlier "
        "answer; only your own): the question is read with the earlier turns and rewritten "
        "to stand alone (`standalone_question`, and the `condense` step of the trace). "
        "Omitted: the answer starts a new conversation.",
    )


class CitationSerializer(serializers.Serializer):
    marker = serializers.IntegerField()
    chunk_id = serializers.CharField()
    source = serializers.CharField(
        help_text="Where the passage comes from: a URL, upload:name, or a file on the server "
        "relative to its ingest root (its name when outside every root)."
    )
    source_id = serializers.IntegerField()
    title = serializers.CharField()
    snippet = serializers.CharField()
    score = serializers.FloatField()
    char_start = serializers.IntegerField()
    char_end = serializers.IntegerField()
    page = serializers.IntegerField(allow_null=True)
    section_path = serializers.ListField(child=serializers.CharField())
    cited = serializers.BooleanField(help_text="Whether the answer carries this marker.")
    spans = serializers.ListField(
        child=serializers.DictField(),
        help_text="The sentences of the passage the answer rests on: offsets in the passage "
        "(start, end) and in the source's text (char_start, char_end), page.",
    )


class TraceStepSerializer(serializers.Serializer):
    stage = serializers.CharField()
    node = serializers.CharField(help_text="Where the step ran in the answering graph.")
    iteration = serializers.IntegerField(help_text="Loops back before this step (0: none).")
    duration_ms = serializers.FloatField()
    skipped = serializers.BooleanField()
    details = serializers.DictField()
    warnings = serializers.ListField(child=serializers.CharField())


class QueryRunSerializer(serializers.Serializer):
    """Documents ``QueryRun.as_payload()``, the shape the API, CLI and browser share."""

    id = serializers.IntegerField(allow_null=True)
    collection = serializers.CharField()
    question = serializers.CharField()
    conversation = serializers.IntegerField(
        allow_null=True, help_text="The conversation this answer is a turn of."
    )
    standalone_question = serializers.CharField(
        allow_blank=True,
        help_text="A follow-up as retrieval read it, rewritten to stand alone; empty otherwise.",
    )
    profile = serializers.CharField()
    answer = serializers.CharField()
    mode = serializers.ChoiceField(choices=QueryRun.Mode.choices)
    mode_label = serializers.CharField()
    citations = CitationSerializer(many=True)
    trace = TraceStepSerializer(many=True)
    warnings = serializers.ListField(child=serializers.CharField())
    groundedness = serializers.DictField(allow_null=True)
    timings = serializers.DictField()
    retrieval_only = serializers.BooleanField()
    model_calls = serializers.IntegerField()
    index_version = serializers.IntegerField()
    options = serializers.DictField()
    error = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField(allow_null=True)
    without_retrieval = serializers.CharField(
        allow_null=True,
        help_text="chit-chat or declined when the adaptive graph answered without retrieval.",
    )
    low_confidence = serializers.BooleanField(
        help_text="A corrective or adaptive run gave its best effort below the confidence bar."
    )
    low_confidence_reason = serializers.CharField(allow_blank=True)
    route = serializers.CharField(allow_null=True, help_text="The adaptive graph's route.")


class QueryRunSummarySerializer(serializers.ModelSerializer):
    collection = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = QueryRun
        fields = [
            "id",
            "collection",
            "question",
            "profile",
            "mode",
            "answer",
            "retrieval_only",
            "total_ms",
            "error",
            "created_at",
        ]
        read_only_fields = fields


class _AskView(APIView):
    retrieval_only = False
    # Per user (REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["query"]): 429 past the rate.
    throttle_scope = "query"
    schema_errors = {
        "POST": {
            409: "The collection was indexed with another embedding model than the active one.",
            502: "The chat model failed and allow_fallback was false.",
        }
    }

    def post(self, request: Request, slug: str) -> Response:
        # Permission first: a collection the caller cannot read is a 404
        # whatever the body says.
        collection, role = collection_and_role_for(request, slug)
        params = QueryRequestSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        run = query_answer(
            user=request.user,
            request=QueryRequest(
                collection=collection,
                question=data["question"],
                profile=data["profile"] or None,
                top_n=data["top_n"],
                overrides=data["overrides"],
                allow_fallback=data["allow_fallback"],
                web_fallback=data["web_fallback"],
                retrieval_only=self.retrieval_only,
                conversation=data["conversation"],
                collection_role=role,
            ),
            # Answered now; its row is written by the process's run writer moments later.
            store_later=True,
        )
        return Response(run_payload(run))


ASK_ERRORS = (
    "400: empty or over-long question, unknown profile/reranker/option (the message lists "
    "the known names), top_n out of range, a profile needing a model that is not configured "
    "(the message names the setting), a conversation about another collection. 404: no such "
    "collection or no read access, or a conversation that is not yours. 502: the chat model "
    "failed and allow_fallback was false."
)


@extend_schema(
    tags=TAG,
    request=QueryRequestSerializer,
    responses=QueryRunSerializer,
    summary="Answer a question with cited passages",
    description="Runs every stage, stores the run and returns it. " + ASK_ERRORS,
)
class QueryView(_AskView):
    """Answer a question from a collection; the stored run is returned."""


@extend_schema(
    tags=TAG,
    request=QueryRequestSerializer,
    responses=QueryRunSerializer,
    summary="Retrieve passages without generating an answer",
    description="Runs stages 1-5 only (the trace says generation was skipped). " + ASK_ERRORS,
)
class RetrieveView(_AskView):
    """Retrieval only: the passages the answer would cite, without generation."""

    retrieval_only = True


@extend_schema(
    tags=TAG,
    parameters=[OpenApiParameter("collection", str, description="Only runs of this collection.")],
)
class QueryRunListView(generics.ListAPIView):
    """The caller's own query runs, newest first."""

    serializer_class = QueryRunSummarySerializer
    schema_not_found = True  # ?collection= naming no collection the caller may read

    def get_queryset(self) -> QuerySet[QueryRun]:
        slug = self.request.query_params.get("collection")
        collection = collection_for(self.request, slug) if slug else None
        return query_runs_for_user(self.request.user, collection=collection)


@extend_schema(tags=TAG)
class QueryRunDetailView(APIView):
    """One stored run (visible to whoever can read its collection)."""

    @extend_schema(responses=QueryRunSerializer, summary="Retrieve a query run")
    def get(self, request: Request, pk: int) -> Response:
        return Response(run_payload(query_run_get_for_user(request.user, run_id=pk)))
