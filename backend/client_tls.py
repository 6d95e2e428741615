"""How the CLI and scripts trust the manager's HTTPS: POPULACE_TLS_CA names the cluster's CA
(see `populace certs init`); unset, the system's roots are used."""

from __future__ import annotations

import os
import ssl


def manager_ssl_context() -> ssl.SSLContext:
    ca = os.environ.get("POPULACE_TLS_CA") or None
    return ssl.create_default_context(cafile=ca)
