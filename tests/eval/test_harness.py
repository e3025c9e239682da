"""The harness end to end on a tiny dataset: real database, real embedder, real pipeline."""

from __future__ import annotations

import pytest

from eval_app.datasets import GoldenCase, RelevantRef
from eval_app.harness import eval_run_cancel, eval_run_create, eval_run_execute
from eval_app.harness.cases import classify
from eval_app.harness.types import EvalError, ProfileUnavailable
from eval_app.models import EvalCaseResult, EvalRun
from query_app.exceptions import OptionNotAllowed, UnknownOption, UnknownProfile

pytestmark = pytest.mark.django_db

Stage = EvalCaseResult.Stage


def _results(run: EvalRun, profile: str) -> dict[str, EvalCaseResult]:
    return {r.case_id: r for r in run.results.filter(profile=profile)}


def test_offline_run_scores_each_case_as_derived_by_hand(tiny_dataset):
    run = eval_run_create(dataset_path=tiny_dataset, compare="fast", offline=True)
    run = eval_run_execute(run=run)

    assert run.status == EvalRun.Status.SUCCEEDED, run.error
    results = _results(run, "fast")
    assert set(results) == {"steps", "bake", "manual", "worldcup"}

    # Four one-passage documents: every ranking holds all four, the asked-about one first.
    for case_id in ("steps", "bake"):
        metrics = results[case_id].metrics
        assert metrics["recall@5"] == 1.0
        assert metrics["precision@5"] == pytest.approx(1 / 5)
        assert metrics["hit_rate@5"] == 1.0
        assert metrics["mrr"] == 1.0
        assert metrics["ndcg@10"] == pytest.approx(1.0)
        assert metrics["refusal_accuracy"] == 1.0
        assert metrics["citation_validity"] == 1.0
        assert metrics["expected_match"] == 1.0
        assert results[case_id].failure_stage == ""
    assert results["steps"].retrieved[0]["ref"] == "lighthouse.md"
    assert results["steps"].retrieved[0]["grade"] == 3
    assert "212" in results["steps"].answer

    # The manual failed to ingest: it can be in no ranking.
    manual = results["manual"]
    assert manual.metrics["recall@10"] == 0.0
    assert manual.metrics["mrr"] == 0.0
    assert manual.failure_stage == Stage.NOT_IN_POOL

    # Nothing in the corpus is about football: the right answer is a refusal.
    worldcup = results["worldcup"]
    assert worldcup.refused
    assert worldcup.metrics["refusal_accuracy"] == 1.0
    assert worldcup.metrics["recall@5"] is None  # no relevant source: no retrieval score
    assert worldcup.metrics["citation_validity"] is None
    assert worldcup.failure_stage == ""

    metrics = run.aggregates["fast"]["metrics"]
    assert metrics["recall@5"]["value"] == pytest.approx(2 / 3)
    assert metrics["recall@5"]["n"] == 3
    assert metrics["precision@5"]["value"] == pytest.approx(0.4 / 3)
    assert metrics["mrr"]["value"] == pytest.approx(2 / 3)
    assert metrics["recall@5"]["low"] <= metrics["recall@5"]["value"] <= metrics["recall@5"]["high"]
    assert run.failure_stages["fast"][Stage.NOT_IN_POOL] == 1
    assert run.aggregates["fast"]["counts"]["cases"] == 4
    # Offline: extractive answers, the heuristic judge, no model call, all labelled.
    assert run.judges["fast"]["answers"]["extractive"] >= 2
    assert all("heuristic" in judge for judge in run.judges["fast"]["groundedness"])
    assert metrics["model_calls"]["value"] == 0
    assert run.offline


def test_run_stores_its_configuration_and_lists_the_source_that_failed(tiny_dataset):
    run = eval_run_execute(
        run=eval_run_create(dataset_path=tiny_dataset, compare="fast", offline=True)
    )

    assert run.dataset_name == "tiny-eval"
    assert len(run.content_hash) == 64
    assert run.code_version
    assert run.k_values == [5, 10]
    snapshot = run.options["fast"]
    assert snapshot["options"]["generation"]["generator"] == "extractive"
    assert snapshot["options"]["groundedness"]["checker"] == "heuristic"
    assert [f["location"].rsplit("/", 1)[-1] for f in run.ingestion["failed"]] == ["manual.pdf"]
    assert run.ingestion["files"] == 5
    assert run.collection.slug == "eval-tiny-eval"
    assert run.pairs_done == run.pairs_total == 4
    assert run.started_at <= run.finished_at


def test_second_run_ingests_nothing_again(tiny_dataset):
    eval_run_execute(run=eval_run_create(dataset_path=tiny_dataset, compare="fast", offline=True))
    run = eval_run_execute(
        run=eval_run_create(dataset_path=tiny_dataset, compare="fast", offline=True)
    )
    assert run.ingestion["sources_unchanged"] == 4
    assert run.ingestion["embeddings_computed"] == 0


def test_comparing_two_profiles_reports_paired_differences(tiny_dataset):
    # The same profile, but declining everything: answers regress, rankings do not.
    run = eval_run_execute(
        run=eval_run_create(
            dataset_path=tiny_dataset,
            compare="fast,fast:floor.min_vector_similarity=0.99",
            offline=True,
        )
    )
    strict = "fast:floor.min_vector_similarity=0.99"
    assert run.profiles == ["fast", strict]
    pair = run.comparisons["pairs"][0]
    assert (pair["profile"], pair["reference"]) == (strict, "fast")
    assert pair["metrics"]["recall@5"]["value"] == 0.0
    # steps and bake answered by fast, declined by the strict floor: -1 on both.
    assert pair["metrics"]["expected_match"]["value"] == pytest.approx(-2 / 3)
    results = _results(run, strict)
    assert results["steps"].failure_stage == Stage.WRONG_REFUSAL
    assert results["steps"].metrics["refusal_accuracy"] == 0.0
    assert run.failure_stages[strict][Stage.WRONG_REFUSAL] == 2


def test_retrieval_only_run_scores_rankings_without_answering(tiny_dataset):
    run = eval_run_execute(
        run=eval_run_create(
            dataset_path=tiny_dataset, compare="fast", offline=True, retrieval_only=True
        )
    )
    results = _results(run, "fast")
    assert results["steps"].metrics["recall@5"] == 1.0
    assert results["steps"].answer == ""
    assert results["steps"].mode == "retrieval-only"
    assert results["steps"].metrics["expected_match"] is None
    assert results["manual"].failure_stage == Stage.NOT_IN_POOL
    metrics = run.aggregates["fast"]["metrics"]
    assert metrics["recall@5"]["value"] == pytest.approx(2 / 3)
    assert metrics["refusal_accuracy"]["value"] is None


def test_unknown_profile_is_refused_before_anything_runs(tiny_dataset):
    with pytest.raises(UnknownProfile) as caught:
        eval_run_create(dataset_path=tiny_dataset, compare="fast,turbo", offline=True)
    assert "turbo" in str(caught.value)
    assert "balanced" in str(caught.value) and "fast" in str(caught.value)
    assert not EvalRun.objects.exists()


def test_unknown_option_in_a_profile_variant_is_refused(tiny_dataset):
    with pytest.raises(UnknownOption):
        eval_run_create(dataset_path=tiny_dataset, compare="fast:rerank.colour=red")


def test_profile_needing_an_unconfigured_cross_encoder_is_reported_not_substituted(tiny_dataset):
    run = eval_run_create(dataset_path=tiny_dataset, compare="fast,balanced", offline=True)
    assert run.profiles == ["fast"]
    assert "cross-encoder" in run.unavailable["balanced"]
    assert "RAG_RERANK_MODEL" in run.unavailable["balanced"]

    with pytest.raises(ProfileUnavailable, match="balanced"):
        eval_run_create(dataset_path=tiny_dataset, compare="balanced", offline=True)


def test_without_cross_encoder_runs_the_profile_under_a_label_that_says_so(tiny_dataset):
    run = eval_run_create(
        dataset_path=tiny_dataset, compare="balanced", offline=True, without_cross_encoder=True
    )
    assert run.profiles == ["balanced:rerank.kind=none"]
    snapshot = run.options["balanced:rerank.kind=none"]
    assert "cross-encoder" in snapshot["substituted"]
    assert snapshot["options"]["retrieval"]["mode"] == "hybrid"
    assert snapshot["options"]["rerank"]["kind"] == "none"


def test_bad_k_values_are_refused(tiny_dataset):
    with pytest.raises(EvalError, match="k values"):
        eval_run_create(dataset_path=tiny_dataset, compare="fast", k_values=[0])


def test_cancelled_run_keeps_its_partial_results(tiny_dataset):
    run = eval_run_create(dataset_path=tiny_dataset, compare="fast", offline=True)

    def cancel_after_first_case(current: EvalRun) -> None:
        if current.pairs_done == 1:
            eval_run_cancel(run=current)

    run = eval_run_execute(run=run, on_progress=cancel_after_first_case)

    assert run.status == EvalRun.Status.CANCELLED
    assert run.pairs_done == 1
    assert list(run.results.values_list("case_id", flat=True)) == ["steps"]
    assert run.aggregates["fast"]["counts"]["cases"] == 1
    assert run.aggregates["fast"]["metrics"]["recall@5"]["value"] == 1.0
    assert run.finished_at is not None


def test_cancelling_a_queued_run_cancels_it_at_once(tiny_dataset):
    run = eval_run_create(dataset_path=tiny_dataset, compare="fast", offline=True)
    run = eval_run_cancel(run=run)
    assert run.status == EvalRun.Status.CANCELLED
    assert eval_run_execute(run=run).results.count() == 0


def _case(**kwargs) -> GoldenCase:
    defaults = {"id": "c", "question": "q?", "relevant": (RelevantRef("a.md", 1),)}
    return GoldenCase(**{**defaults, **kwargs})


@pytest.mark.parametrize(
    ("ranked", "admitted", "refused", "grounded", "expected_match", "stage"),
    [
        (["x.md", "y.md"], [], False, None, None, Stage.NOT_IN_POOL),
        (["x.md", "y.md", "z.md", "a.md"], ["x.md"], False, 1.0, 1.0, Stage.NOT_IN_POOL),
        (["x.md", "a.md"], ["x.md"], False, 1.0, 0.0, Stage.RANKED_OUT),
        (["a.md", "x.md"], [], True, None, 0.0, Stage.WRONG_REFUSAL),
        (["a.md", "x.md"], ["x.md"], False, 1.0, 0.0, Stage.DROPPED_BY_BUDGET),
        (["a.md"], ["a.md"], False, 0.0, 1.0, Stage.NOT_GROUNDED),
        (["a.md"], ["a.md"], False, 1.0, 0.5, Stage.ANSWER_INCOMPLETE),
        (["a.md"], ["a.md"], False, 1.0, 1.0, ""),
    ],
)
def test_failed_cases_are_classified_by_the_first_stage_that_lost_them(
    ranked, admitted, refused, grounded, expected_match, stage
):
    found, _detail = classify(
        case=_case(),
        ranked_refs=ranked,
        pool_size=3,
        kept_size=1,
        admitted_refs=admitted,
        refused=refused,
        grounded=grounded,
        expected_match=expected_match,
    )
    assert found == stage


def test_answering_an_unanswerable_case_is_a_wrong_refusal():
    case = _case(relevant=(), should_refuse=True)
    kwargs = {"ranked_refs": ["x.md"], "pool_size": 5, "kept_size": 5, "admitted_refs": ["x.md"]}
    stage, _ = classify(case=case, refused=False, grounded=1.0, expected_match=None, **kwargs)
    assert stage == Stage.WRONG_REFUSAL
    stage, _ = classify(case=case, refused=True, grounded=None, expected_match=None, **kwargs)
    assert stage == ""


def test_the_browser_offers_the_shipped_dataset_but_not_its_gate_file():
    from django.conf import settings

    from eval_app.harness.datasets import known_datasets

    found = [p.relative_to(settings.BASE_DIR).as_posix() for p in known_datasets()]
    assert "eval/golden/dataset.yaml" in found
    assert "eval/golden/gate.yaml" not in found


def test_only_administrators_may_name_a_model_path_in_a_profile_variant(
    tiny_dataset, django_user_model
):
    staff = django_user_model.objects.create_user("evaluator", password="pw", is_staff=True)
    with pytest.raises(OptionNotAllowed, match=r"'rerank\.model' can be set by administrators"):
        eval_run_create(
            dataset_path=tiny_dataset, compare="fast:rerank.model=/etc", offline=True, user=staff
        )
    assert not EvalRun.objects.exists()
