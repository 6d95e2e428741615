"""Manager settings: one pydantic-settings class, env prefix POPULACE_."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from worker_server.settings import check_tls_files

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./populace.db"
SUPPORTED_SCHEMES = ("sqlite+aiosqlite://", "postgresql+asyncpg://")


class ManagerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="POPULACE_", extra="ignore")

    database_url: str = DEFAULT_DATABASE_URL
    # Unset tokens are generated and stored in data_dir (see backend.tokens): no default secrets.
    api_token: SecretStr | None = None
    join_token: SecretStr | None = None
    # Optional: a read-only token for dashboards and observers (GET routes and the websocket).
    # Unset, it is read from data_dir/viewer_token when `populace tokens viewer` made one.
    viewer_token: SecretStr | None = None
    # Optional: read-only for GET /api/metrics only, for Prometheus (the API and viewer tokens
    # read it too). Unset, it is read from data_dir/metrics_token (`populace tokens metrics`).
    metrics_token: SecretStr | None = None
    data_dir: Path = Path(".populace")
    # Seals the workers' RPC secrets in the store (backend.workers.secret_box), so a database
    # reader cannot drive a worker. Unset, it is read from (or generated into, mode 0600)
    # data_dir/worker_secret_key: keep data_dir (or set this) across restarts, or every
    # worker registers again after one.
    worker_secret_key: SecretStr | None = None
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    # The heartbeat interval and TTL of a small fleet. A larger one is asked to beat less often
    # (with the TTL stretched alike) so the manager answers at most max_heartbeats_per_s beats
    # a second (each costs it about 1.1 ms of CPU, so about 7 % of a core): 1,000 worker
    # processes beat every 16.7 s with a 50 s TTL, see backend.workers.liveness.
    heartbeat_interval_s: float = Field(1.0, gt=0)
    # A worker silent for this long is offline; the sweep runs often enough that
    # detection stays within ttl + sweep interval (< 5 s by default).
    worker_ttl_s: float = Field(3.0, gt=0)
    max_heartbeats_per_s: float = Field(60.0, gt=0)
    liveness_sweep_s: float = Field(0.5, gt=0)
    # Beats are kept in memory and written to the store (and to dashboards) this often.
    liveness_flush_s: float = Field(2.0, gt=0)
    # The dashboard's load history (backend.workers.history): one point per bucket per worker,
    # kept in memory for the window (at most 3,600 points: a smaller bucket covers less time).
    history_bucket_s: float = Field(10.0, gt=0, le=3600)
    history_window_s: float = Field(3600.0, gt=0, le=7 * 86400)
    # Idle HTTP connections stay open this long, longer than workers keep theirs
    # (worker_server.manager_client.KEEPALIVE_S) and than a large fleet's heartbeat interval:
    # a new connection per beat would cost the manager more than the beat.
    http_keep_alive_s: float = Field(180.0, gt=0)
    # After a (re)start nobody is marked offline for this long: workers that lost the manager
    # retry with a backoff of up to 10 s (worker_server.lifecycle.BACKOFF_CAP_S), plus jitter.
    startup_grace_s: float = Field(12.0, ge=0)
    # How often the reaper reconciles workers with the store (orphans, stray populations).
    reaper_interval_s: float = Field(10.0, gt=0)
    # An offline worker's agents are re-placed on other workers once it has been silent this
    # long (a restarted process is usually back well before, and gets them back in place).
    replace_after_s: float = Field(10.0, ge=0)
    # A stopping manager (SIGTERM, SIGINT) writes nothing from the first signal, and exits
    # within this many seconds: past it, with status 70 and a log line naming what hung.
    shutdown_timeout_s: float = Field(10.0, gt=0, le=600)
    # One manager acts on a database (backend.db.lease): the active one checks its lease this
    # often, and a second one, waiting for the lease, asks for it this often.
    lease_check_s: float = Field(1.0, gt=0, le=60)
    # How often the placement keeper looks for populations to repair (it is also woken up).
    keeper_interval_s: float = Field(1.0, gt=0)
    # How long a round waits for agents lost with a worker to be hosted again before the run
    # pauses (or, with allow_partial, counts them lost).
    round_recovery_s: float = Field(120.0, ge=0)
    # How long a run's store calls (a round's commit, reading its hosts, its status) are tried
    # again through a database outage before the run pauses with the reason.
    round_store_retry_s: float = Field(60.0, ge=0)
    # A round in which an LLM endpoint failed more than this share of at least
    # llm_failure_min_requests requests is not kept: the run pauses with the reason.
    llm_failure_ratio: float = Field(0.5, gt=0, le=1)
    llm_failure_min_requests: int = Field(10, ge=1)
    # Larger request bodies get a 413 while they stream in, before they are buffered or parsed
    # (config documents are a few KB; 4 MiB leaves room for large conditional distributions).
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    # POST /api/uploads streams its body to disk under a limit of its own: a real network's
    # edge list (SNAP's largest are a few GB) without raising every other body's.
    max_upload_bytes: int = Field(2 * 1024**3, ge=1024)
    # The largest population POST /api/populations accepts (a 422 naming `size` beyond it); at
    # most the config's own bound of 10^7 agents.
    max_population_size: int = Field(1_000_000, ge=1, le=10_000_000)
    # TLS: with a certificate and key the manager serves HTTPS only. tls_ca is the CA that
    # workers' gRPC certificates are checked against (the system's roots when unset).
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_ca: Path | None = None
    frontend_dist: Path = Path(__file__).resolve().parent.parent / "frontend" / "dist"
    log_level: str = "info"
    # "json": one JSON object per log line (time, level, logger, message, role, pid, exception).
    log_format: Literal["text", "json"] = "text"
    # Slack-compatible incoming webhook told when a run fails or pauses and when a worker goes
    # offline (backend.alerts). A secret (Slack's URL is the credential): never logged.
    alert_webhook_url: SecretStr | None = None
    alert_timeout_s: float = Field(5.0, gt=0)
    # The dashboard's address as people reach it (https://populace.example.org): alerts link the
    # run or worker page. Unset, alerts carry no link.
    dashboard_url: str | None = Field(None, max_length=2048, pattern=r"^https?://[^\s?#]+$")

    @field_validator("database_url")
    @classmethod
    def _known_driver(cls, url: str) -> str:
        if not url.startswith(SUPPORTED_SCHEMES):
            raise ValueError(
                f"database_url must start with one of {', '.join(SUPPORTED_SCHEMES)}; got {url.split(':')[0]!r}"
            )
        return url

    @model_validator(mode="after")
    def _tls_files(self) -> ManagerSettings:
        check_tls_files(self.tls_cert, self.tls_key, self.tls_ca)
        return self

    @field_validator("worker_secret_key")
    @classmethod
    def _key_long_enough(cls, key: SecretStr | None) -> SecretStr | None:
        if key is not None and len(key.get_secret_value().strip()) < 32:
            raise ValueError(
                "worker_secret_key must be at least 32 characters (e.g. openssl rand -hex 24)"
            )
        return key

    @model_validator(mode="after")
    def _viewer_token_is_its_own(self) -> ManagerSettings:
        # A viewer token equal to another token would give a reader that token's rights.
        if self.viewer_token is not None:
            viewer = self.viewer_token.get_secret_value()
            if not viewer.strip():
                raise ValueError("viewer_token must not be empty")
            for other in (self.api_token, self.join_token):
                if other is not None and other.get_secret_value() == viewer:
                    raise ValueError("viewer_token must differ from the API and join tokens")
        return self

    @model_validator(mode="after")
    def _metrics_token_is_its_own(self) -> ManagerSettings:
        # Equal to another token, the metrics token would carry that token's rights.
        if self.metrics_token is not None:
            token = self.metrics_token.get_secret_value()
            if not token.strip():
                raise ValueError("metrics_token must not be empty")
            for other in (self.api_token, self.join_token, self.viewer_token):
                if other is not None and other.get_secret_value() == token:
                    raise ValueError("metrics_token must differ from the other tokens")
        return self

    @property
    def database_kind(self) -> str:
        return "postgresql" if self.database_url.startswith("postgresql") else "sqlite"
