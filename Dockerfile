# Production image: web (gunicorn) and worker (celery) share it.
FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends libmagic1 curl \
    && rm -rf /var/lib/apt/lists/*
COPY requirements.txt .
# torch from the CPU index: the default PyPI wheel pulls several GB of CUDA.
RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
    && pip install --no-cache-dir -r requirements.txt
COPY . .
RUN DATABASE_URL=postgres://build@localhost/build CELERY_BROKER_URL=redis://localhost \
    python manage.py collectstatic --noinput -v0
RUN useradd --create-home ragsite && mkdir -p /data && chown ragsite /data
USER ragsite
EXPOSE 8000
CMD ["gunicorn", "ragsite.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--timeout", "300"]
