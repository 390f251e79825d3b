"""Hosts on a real network for the tests: each host a Linux network namespace of its own, joined
to the others by a veth cable into a switch (a bridge in a namespace of its own).

    with Network() as network:
        server, client = network.host("server"), network.host("client")
        ServerProcess("--host", server.address, prefix=server.command())
        subprocess.run(client.command("python", "-m", "referee.cli", ...))
        server.link.cut()     # the cable pulled at the switch: packets vanish, no reset, no ICMP
        server.link.mend()

A process runs on a host through ``Host.command`` (``ip netns exec``); a socket of the test
process itself is opened on a host with ``Host.run`` (a thread that entered the namespace), so a
DNS server on the client's host (``dnsstub``) answers at its loopback address. Every namespace
is named after the test process and a counter, so parallel runs do not collide, and deleted on
``close`` whatever happened. Needs root and ``ip netns``: ``unavailable()`` says why not.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

CLONE_NEWNET = 0x40000000
# Inside the namespaces only, so it cannot clash with the machine's own networks.
SUBNET = "10.79.0"
_networks = itertools.count(1)


def _ip(*argv: str) -> None:
    """Run ``ip ARGV``; fail with what it said."""
    done = subprocess.run(["ip", *argv], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(argv)}: {done.stderr.strip()}")


def unavailable() -> str | None:
    """Why hosts cannot be made here (a reason to skip), or None when they can."""
    if sys.platform != "linux":
        return "network namespaces are Linux's"
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "no ip command (iproute2)"
    probe = f"remigio-probe-{os.getpid()}"
    try:
        _ip("netns", "add", probe)
    except (RuntimeError, OSError) as error:
        return f"ip netns add failed: {error}"
    try:
        _ip("-n", probe, "link", "add", "probe0", "type", "veth", "peer", "name", "probe1")
    except RuntimeError as error:
        return f"no veth pairs here: {error}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
    return None


@dataclass(frozen=True, slots=True)
class Link:
    """A host's cable, by its end at the switch."""

    switch: str  # the switch's namespace
    device: str  # the cable's device there

    def cut(self) -> None:
        """Pull the cable: from now on every packet either way is silently lost (no RST, no ICMP)."""
        _ip("-n", self.switch, "link", "set", "dev", self.device, "down")

    def mend(self) -> None:
        """Plug it back."""
        _ip("-n", self.switch, "link", "set", "dev", self.device, "up")


@dataclass(frozen=True, slots=True)
class Host:
    """A network namespace with one interface (``eth0``) on the switch, at ``address``."""

    name: str
    namespace: str
    address: str
    link: Link

    def command(self, *argv: str) -> list[str]:
        """The command line that runs ``argv`` on this host (nothing more: a prefix when empty)."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def run(self, function: Callable[..., T], *args: object) -> T:
        """``function(*args)`` in a thread on this host: the sockets it opens belong to the host's
        network (and stay there when other threads use them)."""
        result: list[T] = []
        failure: list[BaseException] = []

        def inside() -> None:
            try:
                _enter(self.namespace)
                result.append(function(*args))
            except BaseException as error:  # raised again in the caller's thread
                failure.append(error)

        thread = threading.Thread(target=inside, name=f"on-{self.name}", daemon=True)
        thread.start()
        thread.join()
        if failure:
            raise failure[0]
        return result[0]

    def readdress(self, address: str) -> Host:
        """This host at a new address (the old one is gone), as a machine that came back elsewhere."""
        _ip("-n", self.namespace, "addr", "flush", "dev", "eth0")
        _ip("-n", self.namespace, "addr", "add", f"{address}/24", "dev", "eth0")
        return Host(self.name, self.namespace, address, self.link)


def _enter(namespace: str) -> None:
    """Move the calling thread into a named network namespace (only this thread moves)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{namespace}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns {namespace}: {os.strerror(errno)}")
    finally:
        os.close(fd)


class Network:
    """A switch, and the hosts on it (``host``); ``close`` deletes them all."""

    def __init__(self) -> None:
        self.tag = f"remigio-{os.getpid()}-{next(_networks)}"
        self.switch = f"{self.tag}-switch"
        self.hosts: list[Host] = []
        self._namespaces: list[str] = []
        self._spare = itertools.count(200)
        try:
            self._add_namespace(self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "dev", "br0", "up")
        except BaseException:
            self.close()
            raise

    def _add_namespace(self, namespace: str) -> None:
        _ip("netns", "add", namespace)
        self._namespaces.append(namespace)
        _ip("-n", namespace, "link", "set", "dev", "lo", "up")

    def host(self, name: str) -> Host:
        """A new host on the switch, at the next free address of ``SUBNET``."""
        number = len(self.hosts) + 2
        namespace = f"{self.tag}-{name}"
        device = f"port{number}"
        self._add_namespace(namespace)
        _ip("link", "add", "eth0", "netns", namespace, "type", "veth", "peer", "name", device, "netns", self.switch)
        _ip("-n", self.switch, "link", "set", "dev", device, "master", "br0", "up")
        _ip("-n", namespace, "addr", "add", f"{SUBNET}.{number}/24", "dev", "eth0")
        _ip("-n", namespace, "link", "set", "dev", "eth0", "up")
        host = Host(name, namespace, f"{SUBNET}.{number}", Link(self.switch, device))
        self.hosts.append(host)
        return host

    def spare_address(self) -> str:
        """An address of ``SUBNET`` no host has had (for ``Host.readdress``)."""
        return f"{SUBNET}.{next(self._spare)}"

    def close(self) -> None:
        """Delete every namespace (and with them the cables and the switch)."""
        for namespace in reversed(self._namespaces):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=30)
        self._namespaces.clear()

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
