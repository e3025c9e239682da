"""A sentence-transformers model on PyTorch: the CPU, or a CUDA GPU in fp16.

Passages are tokenized once with the model's own Rust tokenizer, sorted by
length and batched by a token budget (``batching``), and run through the
model's modules (transformer, pooling, normalisation) exactly as
``SentenceTransformer.encode`` runs them; only the padding differs, which the
attention mask hides. On CUDA the transformer runs in fp16 (pooling in fp32),
batches are larger, and tokenizing runs on a thread of its own feeding the
model, since at GPU speed the tokenizer is the bound.

Small batches on the CPU (a question, the sentences of an answer) run an fp32
ONNX copy of the same modules on ONNX Runtime (``onnx_fp32``): PyTorch eager's
fixed cost per operator dominates such short inputs. The vectors agree with
PyTorch's to ~1e-7, so ingestion and questions share one embedding profile.
When the model cannot be exported, a warning says why and PyTorch runs them.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from collections_app.embedding.batching import (
    TokenBatch,
    length_batches,
    plan_batches,
    prefetched,
)
from collections_app.ingestion.types import EmbeddingProfile

if TYPE_CHECKING:
    from collections_app.embedding.onnx_fp32 import OnnxSmallBatches

logger = logging.getLogger(__name__)

# Batches up to this size (a question, a few variants, the candidate sentences of
# an extractive answer) run on one thread: under load, 20-40 sentences encoded in
# 0.28 s on one thread against 1.5-1.9 s with all of them.
SMALL_BATCH = 48

# Token budget of one batch (rows times padded length) when none is configured: 32
# passages of 256 tokens on a CPU; on a GPU, batches large enough to fill it.
CPU_BATCH_TOKENS = 8192
CUDA_BATCH_TOKENS = 256 * 1024
CUDA_MAX_ROWS = 2048
# Rows of one CPU batch at most, the token budget permitting: short texts (the
# sentences of an extractive answer, embedded at ingestion) in batches of 64 took
# 11.4 CPU-s where batches of 256 took 8.9 (769 sentences of the PostgreSQL
# manual); passages of 100+ tokens fill the budget at 32-80 rows either way.
CPU_MAX_ROWS = 256


def resolve_device(device: str) -> str:
    """``auto``: CUDA when PyTorch sees a GPU, else the CPU; anything else as given."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def rust_tokenizer(tokenizer: Any, *, max_length: int) -> Any:
    """A private copy of a transformers fast tokenizer's Rust tokenizer.

    Truncating at the model's sequence length, never padding (batches pad
    themselves). A copy, so that the shared tokenizer's settings never change
    under another thread.
    """
    from tokenizers import Tokenizer

    private = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    private.no_padding()
    private.enable_truncation(max_length=max_length)
    return private


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the CPU, or on CUDA in fp16."""

    def __init__(
        self,
        *,
        model: str,
        model_name: str = "",
        batch_size: int = 64,
        batch_tokens: int = 0,
        device: str = "cpu",
        parallel_tokenize: bool | None = None,
        onnx_small_batches: bool | None = None,
    ):
        # Never reach for a model hub: models are local directories or cached ids.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self.device = resolve_device(device)
        self.cuda = self.device.startswith("cuda")
        self._model = SentenceTransformer(model, device=self.device)
        self._model.eval()
        if self.cuda:
            # fp16 halves the memory traffic and runs on the tensor cores; the
            # vectors agree with fp32 to ~1e-3, so the profile stays the same.
            self._model.half()
        self._lock = threading.Lock()
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens or (CUDA_BATCH_TOKENS if self.cuda else CPU_BATCH_TOKENS)
        self.max_rows = max(batch_size, CUDA_MAX_ROWS if self.cuda else CPU_MAX_ROWS)
        # At CPU speed tokenizing is ~1 % of the work: a thread for it would only
        # take a core from the model. At GPU speed it is the bound.
        self.parallel_tokenize = self.cuda if parallel_tokenize is None else parallel_tokenize
        dims = self._model.get_embedding_dimension()
        self.profile = EmbeddingProfile(
            provider="sentence-transformers", model=model_name or model, dimensions=int(dims)
        )
        # Content tokens the model reads: its sequence length minus [CLS]/[SEP].
        self.max_tokens = int(self._model.max_seq_length) - 2
        self.tokenizer = self._model.tokenizer
        # A model without a Rust (fast) tokenizer is encoded by the library as it is.
        self._tokens = (
            rust_tokenizer(self.tokenizer, max_length=int(self._model.max_seq_length))
            if getattr(self.tokenizer, "is_fast", False)
            else None
        )
        self._pad_id = int(self.tokenizer.pad_token_id or 0)
        from collections_app.embedding.onnx_fp32 import onnx_enabled

        # None: RAG_EMBEDDING_ONNX decides (on unless set off).
        wanted = onnx_enabled() if onnx_small_batches is None else onnx_small_batches
        self._onnx_pending = wanted and self.device == "cpu"
        self._onnx: OnnxSmallBatches | None = None
        self._model_source = model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors of ``texts``, in their order."""
        if not texts:
            return np.zeros((0, self.profile.dimensions), dtype=np.float32)
        with self._lock, _threads_for(len(texts), cuda=self.cuda):
            if self._tokens is None:
                vectors = self._model.encode(
                    list(texts),
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                return np.asarray(vectors, dtype=np.float32)
            if len(texts) <= SMALL_BATCH:
                onnx = self._small_batch_model()
                if onnx is not None:
                    return self._run_onnx(onnx, texts)
            batches = self.batches(texts)
            if self.parallel_tokenize:
                batches = prefetched(batches, depth=4)
            return self._run(batches, len(texts))

    @property
    def onnx_active(self) -> bool:
        """Whether small batches run on ONNX Runtime (known once one has been encoded)."""
        return self._onnx is not None

    def _small_batch_model(self) -> OnnxSmallBatches | None:
        """The fp32 ONNX copy for small batches: exported (or read) at the first one.

        None when it is off, or when the export failed; then a warning said why,
        once, and PyTorch runs every batch.
        """
        if not self._onnx_pending:
            return self._onnx
        self._onnx_pending = False
        from collections_app.embedding.onnx_fp32 import OnnxSmallBatches, model_cache_dir

        try:
            self._onnx = OnnxSmallBatches(
                self._model, tokens=self._tokens, pad_id=self._pad_id, cache_dir=model_cache_dir()
            )
        except Exception as exc:  # any failure leaves PyTorch, which always works
            logger.warning(
                "embedding model %s: small batches stay on PyTorch, its ONNX export is "
                "unusable (%s); set RAG_EMBEDDING_ONNX=0 to skip the attempt",
                self._model_source,
                exc,
            )
        return self._onnx

    def _run_onnx(self, onnx: OnnxSmallBatches, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.profile.dimensions), dtype=np.float32)
        for batch in self._token_batches(texts):
            out[batch.indices] = onnx.run(batch)
        return out

    def _token_batches(self, texts: Sequence[str]) -> Iterator[TokenBatch]:
        """``texts`` tokenized, sorted by length and batched by the token budget."""
        return length_batches(
            self._tokens,
            texts,
            max_tokens=self.batch_tokens,
            max_rows=self.max_rows,
            pad_id=self._pad_id,
        )

    def steps(self, texts: Sequence[str], size: int) -> list[np.ndarray]:
        """Positions in ``texts``, cut into groups of about ``size`` at this model's
        own batch boundaries, in the order it encodes them.

        Each group encoded alone is batched exactly as one call with every text
        would batch it: long work reports progress between groups and pays no
        extra padding. Cut blindly (a fixed number of texts, each cut re-sorted
        on its own), 1,521 passages cost 11 % more padded tokens in 36 % more
        batches, and ingestion's embed stage took 1.2 times one call's time. No
        group is small enough to be taken for a question's (``SMALL_BATCH``).
        """
        if self._tokens is None:
            return [np.arange(len(texts))]
        lengths = [len(e.ids) for e in self._tokens.encode_batch(list(texts))]
        groups: list[np.ndarray] = []
        current: list[np.ndarray] = []
        rows = 0
        for batch in plan_batches(lengths, max_tokens=self.batch_tokens, max_rows=self.max_rows):
            current.append(batch)
            rows += len(batch)
            if rows >= size:
                groups.append(np.concatenate(current))
                current, rows = [], 0
        if current:
            rest = np.concatenate(current)
            if groups and len(rest) <= SMALL_BATCH:
                groups[-1] = np.concatenate([groups[-1], rest])
            else:
                groups.append(rest)
        return groups

    def batches(self, texts: Sequence[str]) -> Iterator[dict[str, Any]]:
        """The model's inputs for ``texts``: token batches as tensors, with their indices."""
        for batch in self._token_batches(texts):
            yield self._tensors(batch)

    def _tensors(self, batch: TokenBatch) -> dict[str, Any]:
        import torch

        features: dict[str, Any] = {
            "input_ids": torch.from_numpy(batch.input_ids),
            "attention_mask": torch.from_numpy(batch.attention_mask),
            "token_type_ids": torch.from_numpy(batch.token_type_ids),
        }
        if self.cuda:
            # Page-locked, so the copy to the GPU runs beside the model.
            features = {k: v.pin_memory() for k, v in features.items()}
        features["indices"] = batch.indices
        return features

    def _run(self, batches: Iterator[dict[str, Any]], count: int) -> np.ndarray:
        import torch

        out = np.empty((count, self.profile.dimensions), dtype=np.float32)
        on_device: list[tuple[np.ndarray, Any]] = []
        with torch.inference_mode():
            for features in batches:
                indices = features.pop("indices")
                features = {k: v.to(self.device, non_blocking=True) for k, v in features.items()}
                vectors = torch.nn.functional.normalize(self.forward(features), dim=1)
                if self.cuda:
                    # Copied back once at the end: a copy per batch would wait for it.
                    on_device.append((indices, vectors))
                else:
                    out[indices] = vectors.numpy()
            if on_device:
                gathered = torch.cat([v for _, v in on_device]).cpu().numpy()
                out[np.concatenate([i for i, _ in on_device])] = gathered
        return out

    def forward(self, features: dict[str, Any]) -> Any:
        """Sentence embeddings of one batch of token tensors, through the model's modules."""
        if not self.cuda:
            return self._model.forward(features)["sentence_embedding"]
        for position, module in enumerate(self._model):
            features = module(features)
            if position == 0:
                # Pooling and normalisation in fp32, as on the CPU.
                features = {
                    k: v.float() if hasattr(v, "is_floating_point") and v.is_floating_point() else v
                    for k, v in features.items()
                }
        return features["sentence_embedding"].float()

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.tokenize(text))


@contextmanager
def _threads_for(batch: int, *, cuda: bool = False) -> Iterator[None]:
    """One intra-op thread for tiny batches on the CPU.

    Encoding one question with torch's default threads took ~1 s on a loaded
    2-core machine and ~86 ms with one thread: thread hand-offs dominate such
    small work. Large ingestion batches keep every thread.
    """
    import torch

    if batch > SMALL_BATCH or cuda:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
