# Production image: web (gunicorn) and worker (celery) share it.
FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# Web and worker processes load their models as they start (ragsite/warmup.py).
ENV RAG_WARMUP=1
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends libmagic1 curl \
    && rm -rf /var/lib/apt/lists/*
COPY requirements.txt .
# torch from the CPU index: the default PyPI wheel pulls several GB of CUDA.
RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
    && pip install --no-cache-dir -r requirements.txt
# Optional: bake a cross-encoder into the image for the balanced and quality profiles
# (the build then needs network access to the Hugging Face Hub), e.g.
#   docker build --build-arg RERANK_MODEL=cross-encoder/ms-marco-MiniLM-L6-v2 .
# Without it those profiles run without reranking and their trace says so.
ARG RERANK_MODEL=""
RUN if [ -n "$RERANK_MODEL" ]; then \
      HF_HUB_OFFLINE=0 TRANSFORMERS_OFFLINE=0 python -c "import sys; from sentence_transformers import CrossEncoder; CrossEncoder(sys.argv[1], device='cpu').save('/models/reranker')" "$RERANK_MODEL" \
      && rm -rf /root/.cache/huggingface; \
    fi
ENV RAG_RERANK_MODEL_BUILTIN=${RERANK_MODEL:+/models/reranker}
COPY . .
RUN DATABASE_URL=postgres://build@localhost/build CELERY_BROKER_URL=redis://localhost \
    python manage.py collectstatic --noinput -v0
RUN useradd --create-home ragsite && mkdir -p /data && chown ragsite /data
USER ragsite
EXPOSE 8000
# Sized by ragsite/gunicorn_conf.py (a process per core, up to 8, 4 threads each;
# RAGSITE_WEB_WORKERS / RAGSITE_WEB_THREADS override it).
CMD ["gunicorn", "ragsite.wsgi:application", "--bind", "0.0.0.0:8000", "--config", "ragsite/gunicorn_conf.py"]
