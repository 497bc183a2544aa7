# Sift's image: the service and a redis-server from Debian, run as an unprivileged user.
#
#   docker build -t registry.example.com/siftstream:0.1.0 .
#   docker run -p 8000:8000 -e SIFT_API_TOKEN=$(openssl rand -hex 32) -v sift-data:/data \
#     registry.example.com/siftstream:0.1.0
#
# (registry.example.com: a placeholder for your registry, docs/operations/deployment.md, "Images").
#
# With no SIFT_REDIS_URL the service runs its embedded redis-server (append-only file under
# /data, a volume); docker-compose.yml and deploy/kubernetes point SIFT_REDIS_URL at a Redis of
# their own instead. The command serves on 0.0.0.0 and so refuses to start without
# SIFT_API_TOKEN: set it (docs/operations/deployment.md), never --allow-unauthenticated in an image.
FROM docker.io/library/python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SIFT_DATA_DIR=/data \
    SIFT_LOG_FORMAT=json

# The same install steps as CI (scripts/setup): redis-server from Debian's packages, then the
# locked dependencies and the packages.
# Not pinned to a Debian version (hadolint DL3008): bookworm's archive keeps only the newest
# build of a package, security fixes included, so a pinned version stops installing as soon as
# Debian updates it; the base image's tag fixes the release.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --system --gid 10001 sift \
    && useradd --system --uid 10001 --gid sift --create-home sift \
    && mkdir -p /data \
    && chown sift:sift /data

WORKDIR /opt/sift
# The locked dependencies first (requirements/server.lock, every file hash-checked: scripts/lock
# writes it), in a layer of their own that a change to the code does not rebuild; then the two
# packages of this repository, the client and the server, without resolving anything again.
COPY requirements/server.lock ./requirements/
RUN pip install --require-hashes -r requirements/server.lock
COPY pyproject.toml README.md ./
COPY service ./service
COPY client ./client
RUN pip install --no-deps ./client . && rm -rf /opt/sift/build /opt/sift/client/build

USER 10001:10001
VOLUME ["/data"]
EXPOSE 8000

# /v1/healthz: the process serves (an answer while Redis is down too: 503 + Retry-After to
# requests); whether Redis answers is /v1/readyz (docs/operations/deployment.md, "Probes").
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/v1/healthz', timeout=2)"]

CMD ["sift", "serve", "--host", "0.0.0.0", "--port", "8000"]
