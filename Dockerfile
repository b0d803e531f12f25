# Paddock image: the web server, the Celery workers and beat all run from it (docker-compose.yml).
# The GPU worker gets its GPU from the NVIDIA container runtime; pip installs the torch build
# pinned in requirements.txt (pick a CUDA wheel index with --build-arg PIP_EXTRA_INDEX_URL=...).
FROM python:3.11-slim-bookworm

ARG PIP_EXTRA_INDEX_URL=""
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PADDOCK_VAR_DIR=/var/lib/paddock \
    PADDOCK_ARTIFACTS_DIR=/var/lib/paddock/artifacts \
    PADDOCK_DATA_DIR=/data

WORKDIR /app
COPY requirements.txt ./
RUN pip install -r requirements.txt

COPY . .
RUN useradd --system --home-dir /var/lib/paddock paddock \
    && mkdir -p /var/lib/paddock/artifacts /data \
    && chown -R paddock /var/lib/paddock
USER paddock

EXPOSE 8000
# Migrations run in the web service's command (docker-compose.yml), once per deployment.
CMD ["python", "-m", "daphne", "-b", "0.0.0.0", "-p", "8000", "webapp.config.asgi:application"]
