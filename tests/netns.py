"""A multi-node test bed on one machine: Linux network namespaces on a bridge (needs root).

    with NetnsBed(2) as bed:
        manager listens on bed.bridge_ip (the root namespace, next to Postgres on 127.0.0.1)
        bed.run(bed.names[0], argv, env=...)   # a process inside namespace 0
        bed.link_down(bed.names[0])            # partition it; bed.link_up(...) heals it

Layout: a bridge in the root namespace holding 10.231.S.1/24 (S: a /24 that no address or route
of the host uses), and per namespace i a veth pair, one end inside with 10.231.S.(10+i)/24 (and
lo up), the other end on the bridge. Nothing is routed or NATed: traffic stays between the root
namespace and the bed's namespaces.

Every name is PREFIX + a random 4-hex tag (+ a short suffix), at most 15 characters as interface
names must be. A bed holds an flock on /run/populace-netns/TAG.lock while it lives; at start, any
namespace or link of the prefix whose lock nobody holds is left over from a crashed run and is
removed, with the processes still in it. On exit everything is torn down, even on failure.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import re
import secrets
import signal
import subprocess
import time
from pathlib import Path

PREFIX = "popnt"
LOCK_DIR = Path("/run/populace-netns")
SUPERNET = "10.231"  # the bed's /24 is 10.231.S.0/24, S picked among free ones


def _ip(*args: str, check: bool = True) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _namespaces() -> list[str]:
    return [line.split()[0] for line in _ip("netns", "list").splitlines() if line.strip()]


def _links() -> list[str]:
    return [link["ifname"] for link in json.loads(_ip("-j", "link", "show") or "[]")]


def _kill_inside(namespace: str) -> None:
    """SIGKILL every process still in `namespace` (all started in it by a bed), and wait."""
    for _ in range(50):
        pids = [int(p) for p in _ip("netns", "pids", namespace, check=False).split()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


def _remove(tag: str) -> None:
    """Delete the namespaces and links of one bed (whatever of them exists)."""
    for namespace in _namespaces():
        if namespace.startswith(tag):
            _kill_inside(namespace)
            _ip("netns", "del", namespace, check=False)
    for link in _links():  # the host ends of the veths (gone with their peers), the bridge
        if link.startswith(tag):
            _ip("link", "del", link, check=False)


def cleanup_leftovers(prefix: str = PREFIX) -> list[str]:
    """Remove the beds of `prefix` that no live process holds (crashed runs); their tags."""
    tags = {
        m.group(0)
        for name in [*_namespaces(), *_links()]
        if (m := re.match(rf"{re.escape(prefix)}[0-9a-f]{{4}}", name))
    }
    removed = []
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    for tag in sorted(tags):
        lock = LOCK_DIR / f"{tag}.lock"
        with open(lock, "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live bed's
            _remove(tag)
            lock.unlink(missing_ok=True)
            removed.append(tag)
    return removed


def _free_subnet() -> ipaddress.IPv4Network:
    """A 10.231.S.0/24 overlapping no address or (non-default) route of the root namespace."""
    used = []
    for entry in json.loads(_ip("-4", "-j", "addr", "show") or "[]"):
        for info in entry.get("addr_info", []):
            used.append(ipaddress.ip_network(f"{info['local']}/{info['prefixlen']}", strict=False))
    for route in json.loads(_ip("-4", "-j", "route", "show", "table", "all") or "[]"):
        dst = route.get("dst", "default")
        if dst != "default" and re.match(r"^[0-9./]+$", dst):
            used.append(ipaddress.ip_network(dst, strict=False))
    candidates = list(range(1, 255))
    secrets.SystemRandom().shuffle(candidates)
    for s in candidates:
        net = ipaddress.ip_network(f"{SUPERNET}.{s}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError(f"no free /24 in {SUPERNET}.0.0/16")


class NetnsBed:
    """N namespaces on a bridge in the root namespace; a context manager (see the module doc)."""

    def __init__(self, count: int, prefix: str = PREFIX) -> None:
        if not 1 <= count <= 10:
            raise ValueError("1 to 10 namespaces")
        self.count = count
        self.prefix = prefix
        self.tag = ""
        self.names: list[str] = []
        self.bridge_ip = ""
        self._ips: dict[str, str] = {}
        self._host_ends: dict[str, str] = {}
        self._lock = None

    @property
    def bridge(self) -> str:
        return f"{self.tag}br"

    def ip(self, namespace: str) -> str:
        """The namespace's address on the bridge."""
        return self._ips[namespace]

    def __enter__(self) -> NetnsBed:
        cleanup_leftovers(self.prefix)
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        while True:  # a tag nobody holds, locked before anything is named after it
            tag = self.prefix + secrets.token_hex(2)
            lock = open(LOCK_DIR / f"{tag}.lock", "a")  # noqa: SIM115 (held while the bed lives)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            if not any(n.startswith(tag) for n in [*_namespaces(), *_links()]):
                break
            lock.close()
        self.tag, self._lock = tag, lock
        try:
            self._create()
        except BaseException:
            self._teardown()
            raise
        return self

    def _create(self) -> None:
        subnet = _free_subnet()
        hosts = list(subnet.hosts())  # hosts[0] is .1
        self.bridge_ip = str(hosts[0])
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.bridge_ip}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i in range(self.count):
            namespace, host_end, inner_end = f"{self.tag}-{i}", f"{self.tag}h{i}", f"{self.tag}n{i}"
            address = str(hosts[9 + i])  # .10, .11, ...
            _ip("netns", "add", namespace)
            self.names.append(namespace)
            _ip("link", "add", host_end, "type", "veth", "peer", "name", inner_end)
            self._host_ends[namespace] = host_end
            _ip("link", "set", inner_end, "netns", namespace)
            _ip("link", "set", host_end, "master", self.bridge)
            _ip("link", "set", host_end, "up")
            inside = ("-n", namespace)
            _ip(*inside, "addr", "add", f"{address}/24", "dev", inner_end)
            _ip(*inside, "link", "set", inner_end, "up")
            _ip(*inside, "link", "set", "lo", "up")
            self._ips[namespace] = address

    def __exit__(self, *exc) -> None:
        self._teardown()

    def _teardown(self) -> None:
        if self.tag:
            _remove(self.tag)
        if self._lock is not None:
            (LOCK_DIR / f"{self.tag}.lock").unlink(missing_ok=True)
            self._lock.close()
            self._lock = None

    def run(
        self, namespace: str, argv: list[str], env: dict[str, str] | None = None, **kwargs
    ) -> subprocess.Popen:
        """argv inside the namespace (`ip netns exec` execs it: the Popen's pid is argv's)."""
        if namespace not in self._ips:
            raise ValueError(f"{namespace!r} is not one of this bed's namespaces")
        return subprocess.Popen(["ip", "netns", "exec", namespace, *argv], env=env, **kwargs)

    def link_down(self, namespace: str) -> None:
        """Cut the namespace off: its veth's bridge end goes down (packets are dropped, no
        resets are sent, as on a pulled cable)."""
        _ip("link", "set", self._host_ends[namespace], "down")

    def link_up(self, namespace: str) -> None:
        _ip("link", "set", self._host_ends[namespace], "up")
