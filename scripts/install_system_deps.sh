#!/usr/bin/env bash
# Install the system packages the test suite needs, only when they are missing:
#   chromium        (/usr/bin/chromium, the browser the UI tests drive; never `playwright install`)
#   docker-compose  (validates docker-compose.yml; no Docker engine is needed)
#   g++, cmake      (build llama-cpp-python for the llm-local extra: the tests' real Gemma)
# Uses sudo only when not root. Debian 12 is the supported platform.
set -euo pipefail

missing=()
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)

if [[ ${#missing[@]} -eq 0 ]]; then
    echo "system-deps: chromium, docker-compose, g++ and cmake already installed"
    exit 0
fi

echo "system-deps: installing ${missing[*]}"

if ! command -v apt-get >/dev/null 2>&1; then
    msg="system-deps: apt-get not found; install ${missing[*]} yourself (Debian 12 is the supported platform)"
    if [[ "${CI:-}" == "true" ]]; then
        echo "$msg" >&2
        exit 1
    fi
    echo "$msg; the tests that need them will be skipped" >&2
    exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "system-deps: not root and sudo is missing; run as root: apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
apt_opts=(-o Acquire::Retries=5 -o Acquire::http::Timeout=120 -o Acquire::https::Timeout=120)

# A slow or partly failing mirror must not stop us: the cached package lists may already do.
if ! timeout 900 "${sudo[@]}" apt-get "${apt_opts[@]}" update; then
    echo "system-deps: apt-get update failed or timed out; trying with the cached package lists" >&2
fi
"${sudo[@]}" apt-get "${apt_opts[@]}" install -y "${missing[@]}"

[[ -x /usr/bin/chromium ]] || { echo "system-deps: /usr/bin/chromium still missing" >&2; exit 1; }
command -v docker-compose >/dev/null 2>&1 || { echo "system-deps: docker-compose still missing" >&2; exit 1; }
command -v cmake >/dev/null 2>&1 || { echo "system-deps: cmake still missing" >&2; exit 1; }
echo "system-deps: done"
