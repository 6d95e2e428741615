# populace images. Two targets from one file:
#   docker build --target manager -t populace-manager .   # API, dashboard, migrations (.[manager])
#   docker build --target worker  -t populace-worker  .   # light node daemon (.[worker])
# docker-compose.yml builds both.

# --- dashboard: React + Vite, built once, copied into the manager image -------------------
FROM node:20-slim AS frontend
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY frontend/ ./
RUN npm run build

# --- shared Python base ----------------------------------------------------------------------
FROM python:3.11-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /var/lib/populace populace
WORKDIR /app
COPY pyproject.toml README.md ./
COPY worker_server/ worker_server/
COPY backend/ backend/

# --- worker node ---------------------------------------------------------------------------
FROM base AS worker
# Editable, like a checkout: the code stays at /app, where backend/ finds alembic/ and frontend/.
RUN pip install -e '.[worker]'
USER populace
WORKDIR /var/lib/populace
# process i of `--port 50051 --procs N` listens on 50051+i
EXPOSE 50051 50052
CMD ["populace", "worker", "--help"]

# --- manager (last stage: the default target) -------------------------------------------------
FROM base AS manager
COPY alembic/ alembic/
RUN pip install -e '.[manager]'
COPY --from=frontend /src/frontend/dist frontend/dist
ENV POPULACE_DATA_DIR=/var/lib/populace \
    POPULACE_FRONTEND_DIST=/app/frontend/dist
USER populace
WORKDIR /var/lib/populace
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=6 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=3)"]
CMD ["populace", "manager", "--host", "0.0.0.0", "--port", "8000"]
