"""Shared fixtures: one real referee server on 127.0.0.1 (port 0) for the session, and stubs to it;
server processes a test starts (``launch``); and the tier of every test module.

Tiers (markers): ``unit`` (the domain, the adapter and the command line in this process: no
server), ``property`` (the engines and the rules against the brute-force oracle on thousands of
seeded hands, and other bulk runs; a test of another module joins it with
``@pytest.mark.property``), ``service`` (a real server on a loopback port, in this process or as a client's peer),
``process`` (server processes: signals, workers, TLS, metrics, tracing), ``hostile`` (attacks and
faults against real server processes), ``cluster`` (batches on a real local Ray cluster: the ray
extra) and ``tooling`` (lint, types, buf, hadolint, schemas,
documents, wheel builds). ``make test-fast`` runs ``unit``; ``make test`` runs them all.

The test modules are in folders by the layer they test (game, play, api, server, client, cli,
gateway, tooling), named after the module they test (``tests/play/test_record.py`` for
``referee/play/record.py``); the shared helpers (servers, commands, oracle, played...) are here,
beside this file, and every test folder is on the import path (pyproject.toml), so a module's
basename is unique across the folders.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import played
import pytest
from servers import ServerProcess

from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.server.app import ServerThread
from referee.server.config import ServiceLimits


@pytest.fixture(scope="session", autouse=True)
def _shared_corpus(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Under xdist, the simulated records (``played.corpus``) are made by one worker and read by
    the others from the run's temporary directory, which the workers share."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        played.SHARED = tmp_path_factory.getbasetemp().parent


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


TIERS: dict[str, tuple[str, ...]] = {
    "unit": (
        "test_bench_rlcard",
        "test_cards",
        "test_claims",
        "test_cli",
        "test_cli_json",
        "test_cli_records",
        "test_closing",
        "test_cpus",
        "test_deal_checks",
        "test_errors",
        "test_examples",
        "test_flags",
        "test_gateway_addresses",
        "test_groups",
        "test_jsonmsg",
        "test_limits",
        "test_logs",
        "test_record",
        "test_render",
        "test_replay",
        "test_report",
        "test_samples",
        "test_scoring",
        "test_shuffle",
    ),
    "property": (
        "test_close_rules",
        "test_close_search",
        "test_cpsat_paths",
        "test_engines",
        "test_oracle",
        "test_record_lines",
    ),
    "service": (
        "test_batch",
        "test_client",
        "test_dispute_jobs",
        "test_drawings",
        "test_disputes_stream",
        "test_h2client",
        "test_replay_deal",
        "test_review_deal",
        "test_service",
        "test_shuffle_proof",
        "test_wire",
    ),
    "process": (
        "test_access",
        "test_access_parts",
        "test_desk_browser",
        "test_fairplay",
        "test_gateway",
        "test_gateway_browser",
        "test_metrics",
        "test_node_client",
        "test_report_browser",
        "test_scaling",
        "test_server_process",
        "test_tracing",
        "test_workers",
    ),
    "hostile": (
        "test_fair_share",
        "test_gateway_hostile",
        "test_hostile",
        "test_hostile_health",
        "test_hostile_input",
        "test_hostile_metrics",
        "test_hostile_network",
        "test_hostile_three",
        "test_hostile_two",
        "test_soak",
    ),
    "cluster": ("test_cluster", "test_fairplay_ray"),
    "tooling": (
        "test_bench_suite",
        "test_compiled",
        "test_contract",
        "test_deploy",
        "test_deploy_batch",
        "test_docs",
        "test_gateway_files",
        "test_layout",
        "test_lint",
        "test_release",
        "test_typing",
    ),
}
_TIER_OF = {module: tier for tier, modules in TIERS.items() for module in modules}
_TESTS = Path(__file__).resolve().parent


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave unimported a test module none of whose tests the ``-m`` expression can select.

    Importing every module only to deselect most of its tests costs each xdist worker seconds of
    imports and assertion rewriting (``make test-fast`` needs 22 of the modules). A module's tests
    carry its tier, or ``property`` instead, and any other marker only where its source (or a shared
    helper's) names it as ``mark.NAME``: those are the markers the expression is tried with.
    """
    expression = _mark_expression(config)
    if expression is None or collection_path.parent.parent != _TESTS or collection_path.suffix != ".py":
        return None
    tier = _TIER_OF.get(collection_path.stem)
    if tier is None:
        return None  # not a tiered module: collected, and a test module without a tier is an error
    named = _named_markers(collection_path) | _HELPERS_MARKERS
    free = sorted(name for name in _names_in(config.getoption("markexpr")) if name in named)
    tiers = [tier] + (["property"] if "property" in named else [])
    for base in tiers:
        for bits in range(1 << len(free)):
            on = {base} | {name for i, name in enumerate(free) if bits >> i & 1}
            if expression.evaluate(lambda name, /, on=on, **_: name in on):
                return None
    return True


def _mark_expression(config: pytest.Config):  # type: ignore[no-untyped-def]
    """The compiled ``-m`` expression, or None when there is none or pytest's parser is not at hand."""
    text = config.getoption("markexpr")
    if not text:
        return None
    try:
        # pytest's own parser of -m, so a module is left out exactly when -m would deselect it all.
        from _pytest.mark.expression import Expression

        return Expression.compile(text)
    except Exception:  # noqa: BLE001 - an unknown pytest: collect everything, as pytest would
        return None


def _names_in(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)) - {"and", "or", "not"}


def _named_markers(path: Path) -> set[str]:
    """The markers a module's source applies by name (``mark.NAME``)."""
    return set(re.findall(r"mark\.([A-Za-z_][A-Za-z0-9_]*)", path.read_text(encoding="utf-8")))


# Markers the shared helpers name could reach any module's tests through them.
_HELPERS_MARKERS = {
    name
    for helper in _TESTS.glob("*.py")
    if not helper.name.startswith("test_") and helper.name != "conftest.py"
    for name in _named_markers(helper)
}


# First: pytest-xdist's worker reads the xdist_group markers in its own hook of this name, and
# its plugin, registered after this file, would otherwise run before these markers exist.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with its module's tier; a module without one is an error, not a silent gap."""
    for item in items:
        if any(item.iter_markers(name="property")):
            continue
        module = Path(str(item.fspath)).stem
        tier = _TIER_OF.get(module)
        if tier is None:
            raise pytest.UsageError(f"{module}.py has no tier: add it to TIERS in tests/conftest.py")
        item.add_marker(getattr(pytest.mark, tier))
        if _shares_a_module_fixture(item):
            # Under xdist (--dist loadgroup) the module's server processes and gateways start once,
            # on one worker, instead of once on each.
            item.add_marker(pytest.mark.xdist_group(module))


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a fixture of module scope (a server or gateway its module's tests share)."""
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    return any(d.scope == "module" for defs in definitions for d in defs)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under ``--dist loadgroup``, a grouped test's id must carry its group (``@module``), which is
    all pytest-xdist schedules by: without it the groups fall apart silently, and every worker
    starts its own copy of the module's servers. Such a test fails here, saying why."""
    config = item.config
    if hasattr(config, "workerinput") and config.getvalue("loadgroup"):
        if item.get_closest_marker("xdist_group") and "@" not in item.nodeid:
            pytest.fail(
                "pytest-xdist's loadgroup did not group this test: this pytest keeps xdist from writing the "
                "group into the test's id (see the pin on pytest in pyproject.toml)",
                pytrace=False,
            )
