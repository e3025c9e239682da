"""``rag eval`` from the command line, and the CI gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from eval_app.harness import eval_run_create, eval_run_execute
from eval_app.harness.gate import gate_evaluate, gate_load
from eval_app.harness.types import GateFileError, UnknownMetric
from eval_app.models import EvalRun

pytestmark = pytest.mark.django_db


def rag_eval(*args: str) -> str:
    from io import StringIO

    out = StringIO()
    call_command("rag", "eval", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_cli_prints_the_comparison_table_and_the_failed_source(tiny_dataset):
    out = rag_eval("--dataset", str(tiny_dataset), "--compare", "fast", "--offline")
    assert "recall@5" in out and "ndcg@10" in out and "mrr" in out
    assert "0.667 [" in out  # recall@5 of fast, with its interval
    assert "manual.pdf" in out  # the source that failed to ingest
    assert "Not in the candidate pool" in out
    assert "heuristic" in out  # which judge ran
    assert EvalRun.objects.get().status == EvalRun.Status.SUCCEEDED


def test_cli_json_output_holds_aggregates_and_gate(tiny_dataset, tmp_path):
    gate = write(tmp_path, "gate.yaml", "fast:\n  recall@5: 0.5\n  refusal_accuracy: 0.5\n")
    data = json.loads(
        rag_eval(
            "--dataset", str(tiny_dataset), "--offline", "--json", "--gate", str(gate), "--k", "3"
        )
    )
    assert data["status"] == "succeeded"
    assert data["k_values"] == [3, 5]  # the gate's k joins the requested ones
    assert data["aggregates"]["fast"]["metrics"]["recall@3"]["value"] == pytest.approx(2 / 3)
    assert data["gate"]["passed"] is True


def test_gate_fails_below_a_floor_with_a_nonzero_exit(tiny_dataset, tmp_path):
    gate = write(tmp_path, "gate.yaml", "fast:\n  recall@5: 0.9\n  mrr: 0.5\n")
    with pytest.raises(CommandError) as caught:
        rag_eval("--dataset", str(tiny_dataset), "--offline", "--gate", str(gate))
    assert caught.value.returncode == 1
    assert "gate failed" in str(caught.value)


def test_gate_naming_an_unknown_metric_is_an_error_before_the_run(tiny_dataset, tmp_path):
    gate = write(tmp_path, "gate.yaml", "fast:\n  recal@5: 0.9\n")
    with pytest.raises(CommandError) as caught:
        rag_eval("--dataset", str(tiny_dataset), "--offline", "--gate", str(gate))
    assert caught.value.returncode == 2
    assert "recal@5" in str(caught.value) and "recall@K" in str(caught.value)
    assert not EvalRun.objects.exists()


def test_gate_naming_a_profile_the_run_does_not_compare_is_an_error(tiny_dataset, tmp_path):
    gate = write(tmp_path, "gate.yaml", "quality:\n  mrr: 0.5\n")
    with pytest.raises(CommandError, match="quality"):
        rag_eval("--dataset", str(tiny_dataset), "--offline", "--gate", str(gate))


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("fast: [recall@5]\n", GateFileError),
        ("fast:\n  mrr: high\n", GateFileError),
        ("fast:\n  mrr: 0.5\n  bogus_metric: 1\n", UnknownMetric),
        ("max_regression: {ndcg@x: 0.1}\nfast: {mrr: 0.5}\n", UnknownMetric),
        ("fast: {mrr: 0.5\n", GateFileError),
    ],
)
def test_malformed_gate_files_are_refused(tmp_path, text, error):
    with pytest.raises(error):
        gate_load(write(tmp_path, "gate.yaml", text))


def test_gate_fails_on_a_real_regression_against_the_baseline(wider_dataset, tmp_path, settings):
    baseline = eval_run_execute(
        run=eval_run_create(dataset_path=wider_dataset, compare="fast", offline=True)
    )
    assert baseline.aggregates["fast"]["metrics"]["refusal_accuracy"]["value"] == 1.0
    # Same profile name, but now it declines everything: answers regress for real.
    settings.RAG = {
        **settings.RAG,
        "profiles": {"fast": {"floor": {"min_vector_similarity": 0.99}}},
    }
    gate = write(
        tmp_path,
        "gate.yaml",
        "fast:\n  refusal_accuracy: 0.0\n  recall@5: 0.0\nmax_regression: 0.1\n",
    )
    with pytest.raises(CommandError) as caught:
        rag_eval(
            "--dataset",
            str(wider_dataset),
            "--offline",
            "--gate",
            str(gate),
            "--baseline",
            str(baseline.pk),
        )
    assert caught.value.returncode == 1
    run = EvalRun.objects.exclude(pk=baseline.pk).get()
    result = gate_evaluate(gate_load(gate), run)
    assert [f.split(":")[1].split()[0] for f in result.failures] == ["refusal_accuracy"]
    assert "regressed" in result.failures[0]
    # Rankings did not change, so recall shows no regression.
    diff = run.comparisons["baseline"]["profiles"]["fast"]["recall@5"]
    assert diff["value"] == 0.0 and not diff["significant"]


def test_malformed_dataset_yaml_names_line_and_exits_2(tmp_path):
    dataset = write(
        tmp_path, "bad.yaml", "name: x\ncorpus: [c/]\ncases:\n  - id: a\n    question: [\n"
    )
    with pytest.raises(CommandError) as caught:
        rag_eval("--dataset", str(dataset), "--offline")
    assert caught.value.returncode == 2
    assert "line" in str(caught.value) and "malformed YAML" in str(caught.value)


def test_unknown_profile_in_compare_exits_2_listing_known_profiles(tiny_dataset):
    with pytest.raises(CommandError) as caught:
        rag_eval("--dataset", str(tiny_dataset), "--compare", "fast,turbo", "--offline")
    assert caught.value.returncode == 2
    assert "turbo" in str(caught.value) and "balanced" in str(caught.value)
    assert not EvalRun.objects.exists()


def test_unknown_baseline_run_is_an_error(tiny_dataset):
    with pytest.raises(CommandError, match="baseline"):
        rag_eval("--dataset", str(tiny_dataset), "--offline", "--baseline", "999999")


def test_beir_directory_is_imported_and_evaluated(tmp_path, settings):
    settings.VAR_DIR = tmp_path / "var"
    beir = tmp_path / "minibeir"
    (beir / "qrels").mkdir(parents=True)
    docs = [
        ("d1", "Lighthouses", "A lighthouse keeper climbs 212 steps to light the lamp."),
        ("d2", "Bread", "Sourdough loaves are baked at 240 degrees."),
        ("d3", "Apples", "The orchard grows 37 apple varieties."),
    ]
    (beir / "corpus.jsonl").write_text(
        "\n".join(json.dumps({"_id": i, "title": t, "text": x}) for i, t, x in docs) + "\n"
    )
    (beir / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "how many steps does a lighthouse keeper climb"})
        + "\n"
        + json.dumps({"_id": "q2", "text": "how hot is sourdough baked"})
        + "\n"
    )
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    data = json.loads(
        rag_eval("--beir", str(beir), "--limit", "1", "--compare", "fast", "--offline", "--json")
    )
    assert data["dataset"]["format"] == "beir"
    assert data["progress"] == {"done": 1, "total": 1}
    assert data["aggregates"]["fast"]["metrics"]["recall@5"]["value"] == 1.0
    assert data["ingestion"]["files"] == 3
