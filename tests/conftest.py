"""Shared fixtures: one real referee server on 127.0.0.1 (port 0) for the session, and stubs to it;
server processes a test starts (``launch``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import grpc
import pytest
from servers import ServerProcess

from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.server.app import ServerThread
from referee.server.servicer import ServiceLimits


@pytest.fixture(scope="session")
def server_address() -> Iterator[str]:
    """The address of an in-process server, started once for the session and drained at the end."""
    # A generous solve cap: on a busy test machine a heavy call must not trip the 5 s default.
    server = ServerThread(
        "127.0.0.1:0",
        max_concurrent=128,
        max_calls_per_client=None,  # every client of the tests comes from 127.0.0.1
        limits=ServiceLimits(solve_cap_seconds=60, reveal_pid=True),
    )
    try:
        yield server.address
    finally:
        server.stop(grace=1)


@pytest.fixture(scope="session")
def channel(server_address: str) -> Iterator[grpc.Channel]:
    """A channel to the session's server, ready before the first test uses it."""
    with grpc.insecure_channel(server_address) as chan:
        grpc.channel_ready_future(chan).result(timeout=10)
        yield chan


@pytest.fixture(scope="session")
def stub(channel: grpc.Channel) -> referee_pb2_grpc.RefereeServiceStub:
    """A RefereeService stub on the session's channel."""
    return referee_pb2_grpc.RefereeServiceStub(channel)


@pytest.fixture
def launch() -> Iterator[Callable[..., ServerProcess]]:
    """Start a server process with these arguments (``launch(*args)``); all killed after the test."""
    started: list[ServerProcess] = []

    def start(*args: str) -> ServerProcess:
        server = ServerProcess(*args)
        started.append(server)
        return server

    yield start
    for server in started:
        server.kill()
