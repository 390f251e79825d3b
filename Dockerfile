# syntax=docker/dockerfile:1

# Build stage: turn the source into a wheel (generated protobuf code is committed, so no
# protoc is needed here).
FROM python:3.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml ./
COPY referee ./referee
RUN python -m pip wheel --no-deps --wheel-dir /wheels .

# Runtime stage: the wheel and its dependencies in a venv, run by an unprivileged user.
FROM python:3.11-slim-bookworm AS runtime
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH
RUN python -m venv /opt/venv \
    && groupadd --system --gid 10001 referee \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin referee
COPY --from=build /wheels /tmp/wheels
RUN python -m pip install --no-cache-dir /tmp/wheels/*.whl \
    && rm -rf /tmp/wheels
WORKDIR /opt/referee
COPY scripts/health_probe.py ./health_probe.py
USER 10001:10001
EXPOSE 50051
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "/opt/referee/health_probe.py", "127.0.0.1:50051"]
ENTRYPOINT ["remigio-referee", "serve", "--host", "0.0.0.0"]
CMD ["--port", "50051"]
