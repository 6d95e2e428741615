#!/usr/bin/env bash
# Make sure the PostgreSQL server the integration tests use is accepting connections.
# The tests read POPULACE_TEST_PG_ADMIN_URL themselves (default
# postgresql+asyncpg://postgres@127.0.0.1:5432/postgres); we take host and port from it.
# A local Debian cluster that is down is started with pg_ctlcluster.
set -euo pipefail

url="${POPULACE_TEST_PG_ADMIN_URL:-postgresql+asyncpg://postgres@127.0.0.1:5432/postgres}"
read -r host port < <(python3 -c '
import sys
from urllib.parse import urlsplit
u = urlsplit(sys.argv[1])
print(u.hostname or "127.0.0.1", u.port or 5432)
' "$url")

if ! command -v pg_isready >/dev/null 2>&1; then
    echo "ensure_postgres: pg_isready not found; install PostgreSQL 15 (apt-get install -y postgresql)" >&2
    exit 1
fi

is_ready() { pg_isready -q -h "$host" -p "$port"; }

if is_ready; then
    echo "ensure_postgres: PostgreSQL is up at $host:$port"
    exit 0
fi

case "$host" in
    127.0.0.1|localhost|::1) ;;
    *)
        echo "ensure_postgres: PostgreSQL at $host:$port is not accepting connections (remote host: not starting it)" >&2
        exit 1
        ;;
esac

if ! command -v pg_ctlcluster >/dev/null 2>&1 || [[ ! -d /etc/postgresql ]]; then
    echo "ensure_postgres: PostgreSQL is down at $host:$port and no Debian cluster is installed" \
        "(apt-get install -y postgresql, with trust auth for 127.0.0.1)" >&2
    exit 1
fi

mapfile -t versions < <(ls /etc/postgresql)
if [[ ${#versions[@]} -ne 1 ]]; then
    echo "ensure_postgres: expected exactly one version under /etc/postgresql, found: ${versions[*]:-none};" \
        "start the cluster yourself (pg_ctlcluster <version> main start)" >&2
    exit 1
fi

sudo=()
if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
fi

echo "ensure_postgres: starting cluster ${versions[0]}/main"
# Fails with "already running" when the server is merely still starting up; the wait below decides.
"${sudo[@]}" pg_ctlcluster --skip-systemctl-redirect "${versions[0]}" main start || true

for _ in $(seq 1 30); do
    if is_ready; then
        echo "ensure_postgres: PostgreSQL is up at $host:$port"
        exit 0
    fi
    sleep 1
done

echo "ensure_postgres: PostgreSQL at $host:$port is still not accepting connections after 30 s;" \
    "see /var/log/postgresql/postgresql-${versions[0]}-main.log" >&2
exit 1
