"""Client addresses behind proxies: ``x-forwarded-for`` believed only from trusted ones.

A gateway in front of the referee (docs/operations.md, "The gateway") is every call's peer, so
per-client limits and logs would see one client. Each proxy appends the address it got the call
from to ``x-forwarded-for``; read from the right, the addresses are believed while the one that
added them is a trusted proxy (``--trusted-proxies``), and the first one added by a trusted proxy
that is not itself trusted is the client. A peer that is not trusted is the client, whatever it
sends: anyone can write the header.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from referee.server.config import Network, parse_networks

FORWARDED_FOR = "x-forwarded-for"
# More hops than this in one header are not read: the header is the client's to make long.
MAX_HOPS = 16

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def peer_address(peer: str) -> str:
    """The client's address without its port (``ipv4:1.2.3.4:5`` -> ``ipv4:1.2.3.4``)."""
    return peer.rsplit(":", 1)[0] if peer.startswith(("ipv4:", "ipv6:")) else peer


def _ip(text: str) -> Address | None:
    """An address as a proxy writes it: ``1.2.3.4``, ``1.2.3.4:5``, ``::1``, ``[::1]:5``."""
    text = text.strip()
    if text.startswith("["):
        text = text[1 : text.find("]")] if "]" in text else ""
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _format(address: Address) -> str:
    return f"ipv4:{address}" if address.version == 4 else f"ipv6:[{address}]"


@dataclass(frozen=True, slots=True)
class TrustedProxies:
    """The proxies whose ``x-forwarded-for`` is believed (none: the peer is always the client)."""

    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> TrustedProxies:
        """The proxies of a ``--trusted-proxies`` value (``CIDR,...``); ValueError when malformed."""
        return cls(parse_networks(text or ""))

    def trusts(self, address: Address) -> bool:
        """Whether ``address`` is a trusted proxy's."""
        return any(address in network for network in self.networks)

    def client_address(self, peer: str, metadata: Iterable[tuple[str, str | bytes]] | None = ()) -> str:
        """The address of the client behind ``peer`` (``context.peer()``), without a port."""
        direct = peer_address(peer)
        if not self.networks:
            return direct
        return _behind(self.networks, direct, tuple(_hops(metadata)))


@functools.lru_cache(maxsize=4096)
def _behind(networks: tuple[Network, ...], direct: str, hops: tuple[str, ...]) -> str:
    """The client behind the peer address ``direct`` (no port) that sent ``hops`` of
    ``x-forwarded-for``: a value of these alone, remembered, since a gateway's calls come from a
    few clients over a few connections, and reading the addresses cost a call 10 to 20 µs."""
    proxies = TrustedProxies(networks)
    current = _ip(direct[5:]) if direct.startswith(("ipv4:", "ipv6:")) else None
    if current is None or not proxies.trusts(current):
        return direct
    for hop in reversed(hops):
        address = _ip(hop)
        if address is None:  # what a trusted proxy would not write: believe nothing before it
            break
        current = address
        if not proxies.trusts(address):
            break
    return _format(current)


def _hops(metadata: Iterable[tuple[str, str | bytes]] | None) -> Sequence[str]:
    hops: list[str] = []
    for key, value in metadata or ():
        if key == FORWARDED_FOR and isinstance(value, str):
            hops.extend(value.split(","))
    return hops[-MAX_HOPS:]


__all__ = ["FORWARDED_FOR", "TrustedProxies", "peer_address"]
