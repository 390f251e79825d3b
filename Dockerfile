# syntax=docker/dockerfile:1

# The base: a Debian bookworm with Python 3.11. scripts/build_image.py builds the image with no
# registry by passing a base made from Debian's packages (mmdebstrap) as BASE_IMAGE.
ARG BASE_IMAGE=python:3.11-slim-bookworm

# Build stage: turn the source into a wheel (generated protobuf code is committed, so no
# protoc is needed here).
FROM ${BASE_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md LICENSE NOTICE ./
COPY referee ./referee
RUN python -m venv /opt/build \
    && /opt/build/bin/python -m pip wheel --no-deps --wheel-dir /wheels .

# Runtime stage: the wheel and its dependencies in a venv, run by an unprivileged user.
FROM ${BASE_IMAGE} AS runtime
# Which build this is: `make docker` and `make release` pass the package's version and the commit.
ARG VERSION=unversioned
ARG REVISION=unknown
LABEL org.opencontainers.image.title="remigio-referee" \
      org.opencontainers.image.description="A gRPC referee for the card game Remigio: best linkings, closes and deal scoring." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    REMIGIO_HOST=0.0.0.0 \
    REMIGIO_PORT=50051
RUN python -m venv /opt/venv \
    && groupadd --system --gid 10001 referee \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin referee
# EXTRAS=ray makes the Ray worker variant (docker build --build-arg EXTRAS=ray): the ray extra
# (Ray Data, pyarrow) beside the referee, for a KubeRay RayCluster or RayJob, which starts its own
# `ray start` in place of the entrypoint (deploy/kubernetes/batch/rayjob.yaml).
ARG EXTRAS=""
COPY --from=build /wheels /tmp/wheels
# The wheel is this build's own, with its extra's name; the versions are pinned by its metadata.
# hadolint ignore=DL3013
RUN set -- /tmp/wheels/*.whl \
    && python -m pip install --no-cache-dir "$1${EXTRAS:+[$EXTRAS]}" \
    && rm -rf /tmp/wheels
WORKDIR /opt/referee
COPY scripts/health_probe.py ./health_probe.py
# The root file system can be read-only: the server writes only to /tmp (a volume here, an
# emptyDir on Kubernetes) and to /dev/shm (the runtime's own tmpfs).
VOLUME ["/tmp"]
USER 10001:10001
EXPOSE 50051
# The probe asks 127.0.0.1 on REMIGIO_PORT, so it follows the port the server is told to use.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "/opt/referee/health_probe.py"]
ENTRYPOINT ["remigio-referee", "serve"]
