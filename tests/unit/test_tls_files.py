"""`populace certs init` output and the TLS settings both process kinds share."""

from __future__ import annotations

import ipaddress

import pytest
from cryptography import x509
from pydantic import ValidationError

from backend.certs import init_cluster_certs
from backend.settings import ManagerSettings
from worker_server.settings import WorkerSettings, is_loopback


def test_certificates_name_every_host_and_chain_to_the_ca(tmp_path):
    certs = init_cluster_certs(tmp_path / "certs", ["node-1.lan", "10.0.0.7", "[fd00::2]"])
    ca = x509.load_pem_x509_certificate(certs.ca.read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for path in (certs.manager_cert, certs.worker_cert):
        cert = x509.load_pem_x509_certificate(path.read_bytes())
        cert.verify_directly_issued_by(ca)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert set(names.get_values_for_type(x509.DNSName)) == {"node-1.lan", "localhost"}
        assert set(names.get_values_for_type(x509.IPAddress)) == {
            ipaddress.ip_address(a) for a in ("10.0.0.7", "fd00::2", "127.0.0.1", "::1")
        }
        assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for key in ("ca-key.pem", "manager-key.pem", "worker-key.pem"):
        assert (certs.directory / key).stat().st_mode & 0o777 == 0o600


def test_init_refuses_to_overwrite_unless_forced(tmp_path):
    first = init_cluster_certs(tmp_path, [])
    ca = first.ca.read_bytes()
    with pytest.raises(FileExistsError, match="--force"):
        init_cluster_certs(tmp_path, [])
    assert first.ca.read_bytes() == ca
    assert init_cluster_certs(tmp_path, [], overwrite=True).ca.read_bytes() != ca


@pytest.mark.parametrize("settings_class", [ManagerSettings, WorkerSettings])
def test_tls_settings_need_a_key_with_the_certificate_and_existing_files(tmp_path, settings_class):
    extra = {"join_token": "t"} if settings_class is WorkerSettings else {}
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    with pytest.raises(ValidationError, match="tls_cert and tls_key go together"):
        settings_class(tls_cert=cert, **extra)
    with pytest.raises(ValidationError, match="tls_key: no such file"):
        settings_class(tls_cert=cert, tls_key=tmp_path / "missing.pem", **extra)
    with pytest.raises(ValidationError, match="tls_ca: no such file"):
        settings_class(tls_ca=tmp_path / "missing.pem", **extra)
    assert settings_class(tls_cert=cert, tls_key=cert, tls_ca=cert, **extra).tls_cert == cert


@pytest.mark.parametrize(
    "host, loopback",
    [
        ("127.0.0.1", True),
        ("127.8.9.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("10.0.0.7", False),
        ("node-1.lan", False),
    ],
)
def test_what_counts_as_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_a_short_rpc_secret_is_refused():
    with pytest.raises(ValidationError, match="rpc_secret must be at least 16"):
        WorkerSettings(join_token="t", rpc_secret="short")
