"""A sentence-transformers model as fp32 ONNX, for the small batches of a CPU.

PyTorch eager pays a fixed cost per operator call that dominates a forward pass
over a question of a dozen tokens; ONNX Runtime runs the same graph, fused,
for a fraction of it. The model's own modules (transformer, pooling,
normalisation) are traced once per installation with PyTorch's TorchScript
exporter and the file kept under ``var/models/``, named by a digest of the
weights, so a changed model is exported again rather than read stale. The
graph computes in float32 like PyTorch on the CPU: the vectors agree to ~1e-7,
the same embedding profile.

Before it is used, an exported graph is checked against PyTorch on a few
probe texts, one alone and several padded to a common length; any doubt
(export error, a graph that disagrees) is reported as ``OnnxExportFailed`` and
the caller keeps PyTorch.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from collections_app.embedding.batching import TokenBatch, length_batches
from collections_app.embedding.onnx_int8 import derived_model_store
from collections_app.ingestion.types import IngestionError

# Set to 0 / false / no / off to keep every batch on PyTorch.
ENABLE_ENV = "RAG_EMBEDDING_ONNX"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OPSET = 17
# Largest difference from PyTorch an exported graph may show on the probe texts;
# the default model shows ~2e-7.
PROBE_TOLERANCE = 1e-5
PROBE_TEXTS = (
    "x",
    "How do I reset my password?",
    "Which settings matter most when a standby server takes over after the primary "
    "fails, and how long does the switch take with streaming replication?",
)


class OnnxExportFailed(IngestionError):
    """The model could not be exported to ONNX, or the exported graph disagrees with PyTorch."""


def onnx_enabled() -> bool:
    """Whether small CPU batches may run on ONNX Runtime (``RAG_EMBEDDING_ONNX``, default on)."""
    value = os.environ.get(ENABLE_ENV, "").strip().lower()
    return value not in {"0", "false", "no", "off"}


def model_cache_dir() -> Path | None:
    """``var/models/`` of this installation; None outside Django (exported in memory)."""
    try:
        from django.conf import settings

        return Path(settings.VAR_DIR) / "models"
    except Exception:  # a script without settings: export every time
        return None


class OnnxSmallBatches:
    """An fp32 ONNX copy of a sentence-transformers model, on one CPU thread."""

    def __init__(self, model: Any, *, tokens: Any, pad_id: int, cache_dir: Path | None):
        """Export ``model`` (or read its cached export) and check it against PyTorch.

        ``tokens`` is the model's Rust tokenizer (truncating, not padding), used
        for the probe texts. Raises ``OnnxExportFailed``.
        """
        import onnxruntime as ort

        try:
            data = exported_model_bytes(model, cache_dir=cache_dir)
            options = ort.SessionOptions()
            # One thread, as PyTorch gets for small batches: under load the
            # hand-offs between threads cost more than such small work gains.
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            self._session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        except OnnxExportFailed:
            raise
        except Exception as exc:
            raise OnnxExportFailed(f"{type(exc).__name__}: {exc}") from exc
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._check(model, tokens=tokens, pad_id=pad_id)

    def run(self, batch: TokenBatch) -> np.ndarray:
        """L2-normalised float32 vectors of one token batch, in the batch's row order."""
        feeds = {
            "input_ids": batch.input_ids,
            "attention_mask": batch.attention_mask,
            "token_type_ids": batch.token_type_ids,
        }
        out = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})
        return np.asarray(out[0], dtype=np.float32)

    def _check(self, model: Any, *, tokens: Any, pad_id: int) -> None:
        """Compare with PyTorch on a lone probe text and on the probes padded together."""
        for texts in (PROBE_TEXTS[1:2], PROBE_TEXTS):
            for batch in length_batches(
                tokens, texts, max_tokens=1 << 20, max_rows=len(texts), pad_id=pad_id
            ):
                features = {
                    "input_ids": torch.from_numpy(batch.input_ids),
                    "attention_mask": torch.from_numpy(batch.attention_mask),
                    "token_type_ids": torch.from_numpy(batch.token_type_ids),
                }
                with torch.inference_mode():
                    reference = torch.nn.functional.normalize(
                        model.forward(features)["sentence_embedding"], dim=1
                    ).numpy()
                try:
                    vectors = self.run(batch)
                except Exception as exc:
                    raise OnnxExportFailed(f"the exported graph fails to run: {exc}") from exc
                if vectors.shape != reference.shape:
                    raise OnnxExportFailed(
                        f"the exported graph returns {vectors.shape}, PyTorch {reference.shape}"
                    )
                gap = float(np.abs(vectors - reference).max())
                if not gap <= PROBE_TOLERANCE:
                    raise OnnxExportFailed(
                        f"the exported graph differs from PyTorch by {gap:.2e} "
                        f"(at most {PROBE_TOLERANCE:.0e} allowed)"
                    )


def model_digest(model: Any) -> str:
    """A digest of the model's modules, weights and the exporter's versions."""
    import sentence_transformers
    import transformers

    versions = (
        f"opset{OPSET} torch{torch.__version__} transformers{transformers.__version__} "
        f"sentence-transformers{sentence_transformers.__version__}"
    )
    digest = hashlib.sha256()
    digest.update(versions.encode())
    digest.update(repr(model).encode())
    for name, tensor in model.state_dict().items():
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().data)
    return digest.hexdigest()


def exported_model_bytes(model: Any, *, cache_dir: Path | None) -> bytes:
    """The model's fp32 ONNX export, cached in ``cache_dir`` by ``model_digest``."""
    if any(p.dtype != torch.float32 for p in model.parameters()):
        # Half or bfloat16 weights: PyTorch computes in them, a float32 copy would not.
        raise OnnxExportFailed("the model's weights are not float32")
    cached = cache_dir / f"st-fp32-{model_digest(model)[:24]}.onnx" if cache_dir else None
    if cached and cached.is_file():
        return cached.read_bytes()
    with tempfile.TemporaryDirectory(prefix="ragsite-onnx-") as tmp:
        target = Path(tmp) / "model.onnx"
        _export(model, target)
        data = target.read_bytes()
    if cached:
        derived_model_store(cached, data)
    return data


def _export(model: Any, target: Path) -> None:
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise OnnxExportFailed("the model has no tokenizer")
    # Two texts of different lengths, so that the trace keeps the padding mask.
    sample = tokenizer(
        ["a short question", "a longer sentence, with a few more words in it"],
        padding=True,
        return_tensors="pt",
    )
    missing = [n for n in INPUT_NAMES[:2] if n not in sample]
    if missing:
        raise OnnxExportFailed(f"the tokenizer gives no {', '.join(missing)}")
    if "token_type_ids" not in sample:
        sample["token_type_ids"] = torch.zeros_like(sample["input_ids"])
    wrapped = _SentenceEmbedding(model).eval()
    try:
        with warnings.catch_warnings():
            # The tracer's notes about the legacy exporter and shape checks
            # that it records as constants (the probe check catches a bad one).
            warnings.simplefilter("ignore")
            torch.onnx.export(
                wrapped,
                tuple(sample[n] for n in INPUT_NAMES),
                str(target),
                input_names=list(INPUT_NAMES),
                output_names=["sentence_embedding"],
                dynamic_axes={
                    **{n: {0: "batch", 1: "sequence"} for n in INPUT_NAMES},
                    "sentence_embedding": {0: "batch"},
                },
                opset_version=OPSET,
                dynamo=False,
            )
    except Exception as exc:
        raise OnnxExportFailed(f"torch.onnx.export: {type(exc).__name__}: {exc}") from exc


class _SentenceEmbedding(torch.nn.Module):
    """The model's modules and the final L2 normalisation, as the PyTorch path runs them."""

    def __init__(self, model: Any):
        super().__init__()
        self.model = model

    def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
        features = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": token_type_ids,
        }
        embedding = self.model.forward(features)["sentence_embedding"]
        return torch.nn.functional.normalize(embedding, dim=1)
