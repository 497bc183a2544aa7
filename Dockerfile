# Sift's image: the service and a redis-server from Debian, run as an unprivileged user.
#
#   docker build -t sift:0.1.0 .
#   docker run -p 8000:8000 -e SIFT_API_TOKEN=$(openssl rand -hex 32) -v sift-data:/data sift:0.1.0
#
# With no SIFT_REDIS_URL the service runs its embedded redis-server (append-only file under
# /data, a volume); docker-compose.yml and deploy/kubernetes point SIFT_REDIS_URL at a Redis of
# their own instead. The command serves on 0.0.0.0 and so refuses to start without
# SIFT_API_TOKEN: set it (deploy/README.md), never --allow-unauthenticated in an image.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SIFT_DATA_DIR=/data \
    SIFT_LOG_FORMAT=json

# The same install steps as CI (.ci/run): redis-server from Debian's packages, then the package.
RUN apt-get update \
    && apt-get install -y --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --system --gid 10001 sift \
    && useradd --system --uid 10001 --gid sift --home-dir /home/sift --create-home sift \
    && mkdir -p /data \
    && chown sift:sift /data

WORKDIR /opt/sift
COPY pyproject.toml README.md ./
COPY service ./service
RUN pip install . && rm -rf /opt/sift/build

USER 10001:10001
VOLUME ["/data"]
EXPOSE 8000

# Liveness only: /v1/healthz says the process serves; readiness (Redis) is /v1/readyz.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/v1/healthz', timeout=2)"]

CMD ["sift", "serve", "--host", "0.0.0.0", "--port", "8000"]
