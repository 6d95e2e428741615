"""docker-compose.yml is valid, wires the workers to the manager and carries no secrets.

Only `docker-compose config` is run (no Docker engine needed). Running the same services as
local processes is covered by the other integration tests.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from bench.openai_server import VLLM_VERSION

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
TLS_FILE = ROOT / "docker-compose.tls.yml"

# Every secret the compose file needs; each must come from the environment.
SECRETS = {
    "POPULACE_API_TOKEN": "sentinel-api-token-4f1c",
    "POPULACE_JOIN_TOKEN": "sentinel-join-token-9a2e",
    "POPULACE_DB_PASSWORD": "sentinel-db-password-77b0",
    "POPULACE_METRICS_TOKEN": "sentinel-metrics-token-5d3a",
    "POPULACE_GRAFANA_PASSWORD": "sentinel-grafana-password-c81e",
}
# Optional secrets: LLM API keys pass through to the workers (and only to them) when set.
LLM_KEYS = {"OPENAI_API_KEY": "sentinel-llm-key-31d5"}
SECRET_KEY = re.compile(r"TOKEN|PASSWORD|SECRET|_KEY$", re.IGNORECASE)
REQUIRED_VAR = re.compile(r"\$\{(\w+):\?[^}]*\}")
EXPECTED_SERVICES = {"postgres", "manager", "worker-1", "worker-2", "prometheus", "grafana"}


@pytest.fixture(scope="module")
def compose_bin() -> str:
    path = shutil.which("docker-compose")
    if path is None:
        message = "docker-compose is not installed (make system-deps installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def run_config(compose_bin: str, tmp_path: Path, env_vars: dict[str, str], files=(COMPOSE_FILE,)):
    # Isolate from the caller: no inherited POPULACE_* values and no .env file in the repo.
    env = {k: v for k, v in os.environ.items() if k not in SECRETS and k not in LLM_KEYS}
    env.pop("POPULACE_LLM_ALLOWED_HOSTS", None)
    env.update(env_vars)
    empty_env_file = tmp_path / "empty.env"
    empty_env_file.write_text("")
    return subprocess.run(
        [
            compose_bin,
            "--env-file",
            str(empty_env_file),
            *(arg for f in files for arg in ("-f", str(f))),
            "config",
        ],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def as_argv(command) -> list[str]:
    return shlex.split(command) if isinstance(command, str) else [str(part) for part in command]


def environment_of(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


@pytest.fixture(scope="module")
def config(compose_bin: str, tmp_path_factory) -> dict:
    result = run_config(compose_bin, tmp_path_factory.mktemp("compose"), {**SECRETS, **LLM_KEYS})
    assert result.returncode == 0, f"docker-compose config failed:\n{result.stderr}"
    return yaml.safe_load(result.stdout)


def test_config_has_the_services(config: dict) -> None:
    services = config["services"]
    assert set(services) >= EXPECTED_SERVICES, sorted(services)

    manager = services["manager"]
    assert as_argv(manager["command"])[:2] == ["populace", "manager"]
    assert "postgres" in manager["depends_on"]
    db_url = environment_of(manager)["POPULACE_DATABASE_URL"]
    assert db_url.startswith("postgresql+asyncpg://") and "@postgres:5432/" in db_url
    assert services["postgres"]["healthcheck"]["test"]
    assert "/healthz" in " ".join(as_argv(manager["healthcheck"]["test"]))


@pytest.mark.parametrize("name", ["worker-1", "worker-2"])
def test_workers_point_at_the_manager(config: dict, name: str) -> None:
    worker = config["services"][name]
    argv = as_argv(worker["command"])
    assert argv[:2] == ["populace", "worker"]
    assert argv[argv.index("--manager") + 1] == "http://manager:8000"
    assert argv[argv.index("--advertise-host") + 1] == name
    # A stable identity: a recreated container comes back as the same workers.
    assert argv[argv.index("--node") + 1] == name
    assert "--join-token" not in argv, "the join token must come from the environment, not argv"
    assert environment_of(worker)["POPULACE_JOIN_TOKEN"] == SECRETS["POPULACE_JOIN_TOKEN"]
    depends_on = worker["depends_on"]
    assert "manager" in depends_on
    if isinstance(depends_on, dict):
        assert depends_on["manager"].get("condition") == "service_healthy"


def test_llm_services(config: dict) -> None:
    services = config["services"]
    llm = services["llm"]
    argv = as_argv(llm["command"])
    assert argv[:3] == ["populace", "llm", "serve-local"]
    assert argv[argv.index("--host") + 1] == "0.0.0.0"
    assert llm["build"]["target"] == "llm"
    assert "profiles" not in llm, "the CPU LLM server runs by default"

    vllm = services["vllm"]
    assert vllm["profiles"] == ["gpu"]
    assert vllm["image"].startswith("vllm/vllm-openai")
    # Pinned to the release whose request fields the workers send (and the fake server checks).
    assert vllm["image"] == f"vllm/vllm-openai:{VLLM_VERSION}"
    assert not vllm["image"].endswith(":latest")
    assert re.fullmatch(r"v\d+\.\d+\.\d+", vllm["image"].rsplit(":", 1)[1])
    vllm_argv = as_argv(vllm["command"])
    assert vllm_argv[vllm_argv.index("--model") + 1].startswith("/models/")
    assert vllm_argv[vllm_argv.index("--tensor-parallel-size") + 1] == "1", "default TP"
    assert "--enable-prompt-tokens-details" in vllm_argv, "rounds count the cached prompt tokens"
    assert "/health" in " ".join(as_argv(vllm["healthcheck"]["test"]))
    assert vllm["healthcheck"]["start_period"]
    # Weights come from the mounted directory, never from a hub.
    assert environment_of(vllm)["HF_HUB_OFFLINE"] == "1"


def test_vllm_tensor_parallel_size_comes_from_the_environment(
    compose_bin: str, tmp_path: Path
) -> None:
    env = {**SECRETS, "VLLM_TENSOR_PARALLEL_SIZE": "4"}
    result = run_config(compose_bin, tmp_path, env)
    assert result.returncode == 0, result.stderr
    argv = as_argv(yaml.safe_load(result.stdout)["services"]["vllm"]["command"])
    assert argv[argv.index("--tensor-parallel-size") + 1] == "4"


def test_llm_keys_go_to_the_workers_only_and_the_workers_call_only_allowed_hosts(
    config: dict, compose_bin: str, tmp_path: Path
) -> None:
    services = config["services"]
    for name in ("worker-1", "worker-2"):
        env = environment_of(services[name])
        assert env["OPENAI_API_KEY"] == LLM_KEYS["OPENAI_API_KEY"]
        assert env["POPULACE_LLM_ALLOWED_HOSTS"] == "llm:8081,vllm:8000"
    for name in set(services) - {"worker-1", "worker-2"}:
        assert LLM_KEYS["OPENAI_API_KEY"] not in str(services[name]), name

    # Optional: without it the stack still starts (an endpoint naming it is then refused).
    result = run_config(compose_bin, tmp_path, SECRETS)
    assert result.returncode == 0, result.stderr
    worker = yaml.safe_load(result.stdout)["services"]["worker-1"]
    assert environment_of(worker)["OPENAI_API_KEY"] == ""


def test_every_secret_comes_from_the_environment(config: dict) -> None:
    sentinels = set(SECRETS.values()) | set(LLM_KEYS.values())
    for name, service in config["services"].items():
        for key, value in environment_of(service).items():
            if SECRET_KEY.search(key):
                assert value in sentinels, f"{name}.{key} is hard-coded: {value!r}"
            if "://" in value and "@" in value.split("://", 1)[1]:
                password = value.split("://", 1)[1].split("@", 1)[0].partition(":")[2]
                assert password in sentinels, f"{name}.{key} embeds a hard-coded password"

    # And in the file itself: secrets use the required-variable form, never a default.
    text = COMPOSE_FILE.read_text()
    assert set(REQUIRED_VAR.findall(text)) == set(SECRETS)
    assert not re.search(r"\$\{\w*(TOKEN|PASSWORD|SECRET)\w*:?-", text), (
        "secret with a default value"
    )


@pytest.mark.parametrize("missing", sorted(SECRETS))
def test_config_fails_without_a_secret(compose_bin: str, tmp_path: Path, missing: str) -> None:
    env_vars = {k: v for k, v in SECRETS.items() if k != missing}
    result = run_config(compose_bin, tmp_path, env_vars)
    assert result.returncode != 0, f"config succeeded without {missing}: a default secret?"
    assert missing in result.stderr


def test_the_tls_override_turns_tls_on_for_both_planes(compose_bin: str, tmp_path: Path) -> None:
    result = run_config(compose_bin, tmp_path, SECRETS, files=(COMPOSE_FILE, TLS_FILE))
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    tls_env = ("POPULACE_TLS_CERT", "POPULACE_TLS_KEY", "POPULACE_TLS_CA")
    manager = services["manager"]
    assert all(environment_of(manager).get(k) for k in tls_env)
    assert "https://" in " ".join(as_argv(manager["healthcheck"]["test"]))
    for name in ("worker-1", "worker-2"):
        worker = services[name]
        argv = as_argv(worker["command"])
        assert argv[argv.index("--manager") + 1] == "https://manager:8000"
        env = environment_of(worker)
        assert all(env.get(k) for k in tls_env), env
        assert env["POPULACE_JOIN_TOKEN"] == SECRETS["POPULACE_JOIN_TOKEN"]
        assert "secure_channel" in " ".join(as_argv(worker["healthcheck"]["test"]))
    for name in ("manager", "worker-1", "worker-2"):
        mounts = services[name]["volumes"]
        certs = [m for m in mounts if "/etc/populace/tls/" in str(m)]
        # Long syntax ({target, read_only}) or short ("source:target:ro"), by compose version.
        assert certs and all(
            m.get("read_only") if isinstance(m, dict) else m.endswith(":ro") for m in certs
        ), mounts
        # The CA's key issues certificates: it never leaves the operator's machine.
        assert "ca-key.pem" not in str(mounts)


def test_prometheus_scrapes_the_manager_with_the_metrics_token_and_every_worker_process(
    config: dict,
) -> None:
    services = config["services"]
    prometheus, grafana = services["prometheus"], services["grafana"]
    token = SECRETS["POPULACE_METRICS_TOKEN"]
    assert environment_of(services["manager"])["POPULACE_METRICS_TOKEN"] == token
    assert environment_of(prometheus)["POPULACE_METRICS_TOKEN"] == token
    # The token reaches the credentials_file at start; it is in no argv and no config file.
    script = " ".join(as_argv(prometheus["command"]))
    assert token not in script and "/prometheus/metrics_token" in script
    scrape = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in scrape["scrape_configs"]}
    manager_job = jobs["populace-manager"]
    assert manager_job["authorization"]["credentials_file"] == "/prometheus/metrics_token"
    assert manager_job["static_configs"][0]["targets"] == ["manager:8000"]

    # Each worker container's processes serve /metrics on --metrics-port + i, i < --procs.
    targets = set(jobs["populace-workers"]["static_configs"][0]["targets"])
    expected = set()
    for name in ("worker-1", "worker-2"):
        argv = as_argv(services[name]["command"])
        base, procs = (
            int(argv[argv.index("--metrics-port") + 1]),
            int(argv[argv.index("--procs") + 1]),
        )
        expected |= {f"{name}:{base + i}" for i in range(procs)}
        assert not any(str(base) in str(p) for p in services[name].get("ports", [])), (
            "worker metrics stay on the compose network"
        )
    assert targets == expected

    # Grafana: provisioned from the repository, its admin password from the environment.
    assert (
        environment_of(grafana)["GF_SECURITY_ADMIN_PASSWORD"]
        == SECRETS["POPULACE_GRAFANA_PASSWORD"]
    )
    mounts = " ".join(str(m) for m in grafana["volumes"])
    assert "deploy/grafana/provisioning" in mounts and "deploy/grafana/dashboards" in mounts
    for service in (prometheus, grafana):
        # Published on the host's loopback only.
        assert all("127.0.0.1" in str(port) for port in service["ports"]), service["ports"]
