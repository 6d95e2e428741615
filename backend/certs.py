"""`populace certs init`: a private CA and certificates for a small cluster, in one step.

One CA signs two server certificates: the manager's (HTTPS) and the workers' (gRPC; one
certificate that every node may use). Both name every host given (plus localhost and the
loopback addresses), since each is checked against the name the peer dials. Private keys are
written 0600; the CA's key stays with the operator (it is only needed to issue more).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
VALID_DAYS = 825  # the longest validity browsers accept for a server certificate


@dataclass(frozen=True)
class ClusterCerts:
    directory: Path
    ca: Path
    manager_cert: Path
    manager_key: Path
    worker_cert: Path
    worker_key: Path


def init_cluster_certs(
    directory: Path, hosts: list[str], *, overwrite: bool = False
) -> ClusterCerts:
    """Write ca.pem, ca-key.pem, manager.pem, manager-key.pem, worker.pem, worker-key.pem."""
    certs = ClusterCerts(
        directory,
        directory / "ca.pem",
        directory / "manager.pem",
        directory / "manager-key.pem",
        directory / "worker.pem",
        directory / "worker-key.pem",
    )
    existing = [p for p in directory.glob("*.pem")] if directory.is_dir() else []
    if existing and not overwrite:
        raise FileExistsError(
            f"{directory} already holds certificates ({', '.join(sorted(p.name for p in existing))});"
            " pass --force to replace them"
        )
    names = _subject_names([*hosts, *LOCAL_NAMES])
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _ca_certificate(ca_key)
    _write_key(directory / "ca-key.pem", ca_key)
    certs.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    for role, cert_path, key_path in (
        ("manager", certs.manager_cert, certs.manager_key),
        ("worker", certs.worker_cert, certs.worker_key),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _node_certificate(role, key, names, ca_cert, ca_key)
        _write_key(key_path, key)
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return certs


def _ca_certificate(ca_key: ec.EllipticCurvePrivateKey) -> x509.Certificate:
    """The self-signed CA: it signs certificates and CRLs, with no CA below it (path length 0)."""
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "populace cluster CA")])
    return (
        _builder(ca_name, ca_name, ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )


def _node_certificate(
    role: str,
    key: ec.EllipticCurvePrivateKey,
    names: list[x509.GeneralName],
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
) -> x509.Certificate:
    """A manager's or workers' certificate, for every host name, as server and client (mTLS)."""
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"populace {role}")])
    return (
        _builder(subject, ca_cert.subject, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )


def _subject_names(hosts: list[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    seen: set[str] = set()
    for host in hosts:
        host = host.strip().strip("[]")
        if not host or host in seen:
            continue
        seen.add(host)
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _builder(subject: x509.Name, issuer: x509.Name, key) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # tolerate small clock skew
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
    )


def _write_key(path: Path, key) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
