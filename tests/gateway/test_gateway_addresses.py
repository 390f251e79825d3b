"""Client addresses behind a gateway: ``x-forwarded-for`` believed only from trusted proxies, read
from the right, and the ``--trusted-proxies`` flag that names them."""

from __future__ import annotations

import argparse

import pytest

from referee.server.access import TrustedProxies
from referee.server.config import ServerConfig, add_arguments

GATEWAY = "ipv4:10.0.0.2:41234"


def _forwarded(*values: str) -> list[tuple[str, str]]:
    return [("x-forwarded-for", value) for value in values]


def test_without_trusted_proxies_the_peer_is_the_client() -> None:
    proxies = TrustedProxies()
    assert proxies.client_address(GATEWAY, _forwarded("203.0.113.9")) == "ipv4:10.0.0.2"


def test_a_trusted_proxy_names_the_client() -> None:
    proxies = TrustedProxies.parse("10.0.0.0/24")
    assert proxies.client_address(GATEWAY, _forwarded("198.51.100.7")) == "ipv4:198.51.100.7"


def test_an_untrusted_peer_cannot_forge_the_header() -> None:
    proxies = TrustedProxies.parse("10.0.0.0/24")
    assert proxies.client_address("ipv4:192.0.2.50:5000", _forwarded("10.0.0.9, 198.51.100.7")) == "ipv4:192.0.2.50"


def test_what_the_client_wrote_before_the_proxies_is_not_believed() -> None:
    # The client sent "1.2.3.4" itself; the gateway appended the address it saw.
    proxies = TrustedProxies.parse("10.0.0.0/24")
    assert proxies.client_address(GATEWAY, _forwarded("1.2.3.4, 198.51.100.7")) == "ipv4:198.51.100.7"


def test_a_chain_of_trusted_proxies_is_walked_from_the_right() -> None:
    # A load balancer (10.0.1.5, trusted) in front of the gateway (10.0.0.2, trusted).
    proxies = TrustedProxies.parse("10.0.0.0/24, 10.0.1.0/24")
    forwarded = _forwarded("1.2.3.4, 198.51.100.7", "10.0.1.5")
    assert proxies.client_address(GATEWAY, forwarded) == "ipv4:198.51.100.7"


def test_every_hop_trusted_gives_the_first() -> None:
    proxies = TrustedProxies.parse("10.0.0.0/8")
    assert proxies.client_address(GATEWAY, _forwarded("10.9.9.9, 10.0.1.5")) == "ipv4:10.9.9.9"


def test_garbage_stops_the_walk_at_the_last_trusted_hop() -> None:
    proxies = TrustedProxies.parse("10.0.0.0/8")
    assert proxies.client_address(GATEWAY, _forwarded("nonsense, 10.0.1.5")) == "ipv4:10.0.1.5"
    assert proxies.client_address(GATEWAY, _forwarded("")) == "ipv4:10.0.0.2"
    assert proxies.client_address(GATEWAY, []) == "ipv4:10.0.0.2"


def test_ipv6_ports_and_mapped_addresses() -> None:
    proxies = TrustedProxies.parse("::1/128,127.0.0.1")
    assert proxies.client_address("ipv6:[::1]:5000", _forwarded("[2001:db8::7]:443")) == "ipv6:[2001:db8::7]"
    assert proxies.client_address("ipv4:127.0.0.1:5000", _forwarded("::ffff:192.0.2.1")) == "ipv4:192.0.2.1"
    assert proxies.client_address("ipv4:127.0.0.1:5000", _forwarded("192.0.2.1:8080")) == "ipv4:192.0.2.1"
    assert proxies.client_address("unix:/tmp/socket", _forwarded("192.0.2.1")) == "unix:/tmp/socket"


def test_a_long_header_is_read_from_its_end_only() -> None:
    proxies = TrustedProxies.parse("10.0.0.0/8")
    hops = ", ".join(["10.0.0.1"] * 100 + ["198.51.100.7"] + ["10.0.0.1"] * 3)
    assert proxies.client_address(GATEWAY, _forwarded(hops)) == "ipv4:198.51.100.7"


def _config(*argv: str) -> ServerConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return ServerConfig.from_args(parser.parse_args(list(argv)))


def test_the_flag_and_its_environment_twin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("REMIGIO_TRUSTED_PROXIES", raising=False)
    assert _config().trusted_proxies == ""
    assert _config("--trusted-proxies", "10.0.0.0/8,::1").trusted_proxies == "10.0.0.0/8,::1"
    monkeypatch.setenv("REMIGIO_TRUSTED_PROXIES", "192.168.0.0/16")
    assert _config().trusted_proxies == "192.168.0.0/16"
    with pytest.raises(SystemExit):
        _config("--trusted-proxies", "10.0.0.0/8,not-a-network")
    assert "not an address or CIDR network: 'not-a-network'" in capsys.readouterr().err
