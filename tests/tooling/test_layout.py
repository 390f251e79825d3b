"""The plan of the package, checked: the domain and the adapter import no gRPC, no module reaches
into another's private names, the modules import one another without cycles, and the layout in
docs/design.md names every module there is."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "referee"


def _modules(package: Path = PACKAGE) -> Iterator[tuple[str, Path]]:
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if "_gen" in parts:
            continue
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


MODULES = dict(_modules())
# The benchmarks and the gateway's tools import the package and one another too.
TOOLS = {**dict(_modules(ROOT / "bench")), **dict(_modules(ROOT / "gateway"))}
_OURS = ("referee", "bench", "gateway")


def _imports(path: Path) -> Iterator[tuple[str, tuple[str, ...], int]]:
    """(module, names imported from it, line) of every import statement, at any depth."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, (), node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, tuple(alias.name for alias in node.names), node.lineno


def _top_level_imports(path: Path) -> Iterator[str]:
    """The referee modules imported when ``path`` is imported (top-level statements only)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("referee"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                yield candidate if candidate in MODULES else node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.startswith("referee"))


# The layers are folders: game (RULES §1-§8), play (§9: records, replay, simulate, review), the
# drawing (render, which reads both), then the adapter (api) and the fronts. Each may import what
# its row says, and nothing else of the package.
FOLDERS = (
    "referee.game",
    "referee.play",
    "referee.render",
    "referee.api",
    "referee.server",
    "referee.cli",
    "referee.client",
    "referee.connection",
)


def layer_of(name: str) -> str:
    """The layer a module of the package is in: its folder (or, for render and connection, its module)."""
    for folder in FOLDERS:
        if name == folder or name.startswith(folder + "."):
            return folder.removeprefix("referee.")
    return "package"


MAY_IMPORT = {
    "package": set(),
    "game": {"game"},
    "play": {"game", "play"},
    "render": {"game", "play"},
    # The adapter draws answers (DrawAnswer, the report's cases) with the one drawing.
    "api": {"game", "play", "render", "api"},
    "server": {"game", "play", "api", "server"},
    "client": {"game", "play", "api", "client", "connection"},
    # How a client connects (TLS files, the key, keepalive): read by the client and batch alike.
    "connection": set(),
    # The command line's serve and keygen start the server's own code; batch is a client too.
    "cli": {"game", "play", "render", "api", "server", "client", "connection", "cli"},
}
DOMAIN = [name for name in MODULES if layer_of(name) in ("game", "play", "render")]
ADAPTER = [name for name in MODULES if layer_of(name) == "api"]


@pytest.mark.parametrize("name", [name for name in MODULES if name != "referee"])
def test_each_layer_imports_only_the_layers_below_it(name: str) -> None:
    layer = layer_of(name)
    for module, names, line in _imports(MODULES[name]):
        if not module.startswith("referee") or module.startswith("referee._gen"):
            continue
        named = [f"{module}.{item}" for item in names if f"{module}.{item}" in MODULES]
        target = named[0] if named else module
        if target == "referee":
            continue  # the package's version
        assert layer_of(target) in MAY_IMPORT[layer], f"{name} ({layer}) imports {module} (line {line})"


@pytest.mark.parametrize("name", DOMAIN + ADAPTER)
def test_the_domain_and_the_adapter_import_no_grpc_and_no_server(name: str) -> None:
    for module, _, line in _imports(MODULES[name]):
        assert not module.startswith(("grpc", "grpc_")), f"{name} imports {module} (line {line})"
        assert not module.startswith("referee.server"), f"{name} imports {module} (line {line})"
        if name in DOMAIN:
            assert not module.startswith(("referee.api", "referee._gen", "google.protobuf")), (
                f"{name} imports {module} (line {line})"
            )


@pytest.mark.parametrize("name", [*MODULES, *TOOLS])
def test_no_module_imports_a_private_name_of_another(name: str) -> None:
    path = MODULES.get(name) or TOOLS[name]
    known = {**MODULES, **TOOLS}
    for module, names, line in _imports(path):
        if not module.startswith(_OURS) or module.startswith("referee._gen"):
            continue
        private = [item for item in names if item.startswith("_") and item != "__version__"]
        assert not private, f"{name} imports {private} from {module} (line {line})"
    # module._name: a private attribute reached through an imported module of ours.
    text = path.read_text(encoding="utf-8")
    aliases = set()
    for module, names, _ in _imports(path):
        if module.startswith(_OURS) and not module.startswith("referee._gen"):
            aliases.update(item for item in names if f"{module}.{item}" in known)
    for alias in aliases:
        found = re.search(rf"\b{alias}\._[a-z]\w*", text)
        assert found is None, f"{name} uses {found.group(0) if found else ''}"


def _all_imports(path: Path) -> Iterator[str]:
    """The modules of the package ``path`` imports, at any depth (a function's import too)."""
    for module, names, _ in _imports(path):
        if not module.startswith("referee"):
            continue
        found = [f"{module}.{name}" for name in names if f"{module}.{name}" in MODULES]
        yield from found or [module]


def test_the_modules_import_one_another_without_cycles() -> None:
    """No cycle, counting every import: a function's own imports too (they run, just later)."""
    graph = {
        name: {target for target in _all_imports(path) if target in MODULES and target != name}
        for name, path in MODULES.items()
    }
    # A package's __init__ re-exporting its modules is not a cycle of theirs.
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if node.startswith(target + ".") or target.startswith(node + "."):
                continue
            if state.get(target) == 1:
                cycle = stack[stack.index(target) :] + [target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)


def test_the_supervisor_is_given_what_it_runs() -> None:
    imported = {module for module, _, _ in _imports(MODULES["referee.server.supervisor"])}
    assert not imported & {"referee.server.app", "referee.server.process", "referee.server.config"}


def test_the_layout_in_design_md_names_every_module() -> None:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    block = text[text.index("## The layout") :]
    block = block[: block.index("\n## ", 4)]
    missing = []
    for path in MODULES.values():
        if path.name in ("__init__.py", "__main__.py"):
            continue
        relative = path.relative_to(PACKAGE)
        # By its file name: a module's bare name ("job", "plan") also stands in the descriptions.
        if path.name not in block and str(relative) not in block:
            missing.append(str(relative))
    assert not missing, f"docs/design.md's layout does not name {missing}"


# Where a module's tests are when no test file bears its name: the tests that exercise it through
# the layer above (the commands through ``main``, the access parts through a real server...).
TESTED_BY = {
    "api/convert.py": ("api/test_service.py", "api/test_contract.py"),
    "api/disputes.py": ("api/test_disputes_stream.py", "api/test_record_lines.py"),
    "api/handlers.py": ("api/test_service.py", "api/test_replay_deal.py", "api/test_review_deal.py"),
    "api/records.py": ("api/test_replay_deal.py",),
    "api/reviews.py": ("api/test_review_deal.py",),
    "cli/app.py": ("cli/test_cli.py",),
    "connection.py": ("client/test_client.py", "server/test_access.py"),
    "cli/common.py": ("cli/test_cli.py", "cli/test_cli_json.py"),
    "cli/fairplay.py": ("play/test_fairplay.py",),
    "cli/hands.py": ("cli/test_cli.py", "cli/test_cli_json.py"),
    "cli/records.py": ("cli/test_cli_records.py",),
    "cli/merge.py": ("cli/test_cluster.py",),
    "cli/serve.py": ("cli/test_cli.py", "server/test_server_process.py"),
    "cli/shards.py": ("cli/test_cluster.py",),
    "game/deal.py": ("game/test_deal_checks.py",),
    "game/kinds.py": ("game/test_cards.py",),
    "game/rules.py": ("game/test_close_rules.py", "cli/test_cli.py"),
    "game/linking/audit.py": ("game/test_engines.py",),
    "game/linking/base.py": ("game/test_engines.py", "game/test_oracle.py"),
    "game/linking/budget.py": ("game/test_limits.py", "api/test_review_deal.py"),
    "game/linking/candidates.py": ("game/test_cpsat_paths.py",),
    "game/linking/cpsat.py": ("game/test_cpsat_paths.py", "game/test_engines.py"),
    "game/linking/dispatch.py": ("game/test_oracle.py", "game/test_engines.py"),
    "game/linking/search.py": ("game/test_engines.py",),
    "play/measure.py": ("play/test_review.py",),
    "play/simulate.py": ("api/test_replay_deal.py", "cli/test_cli_records.py"),
    "server/access/interceptor.py": ("server/test_access.py",),
    "server/access/keys.py": ("server/test_access.py", "server/test_access_parts.py"),
    "server/access/plan.py": ("server/test_access_parts.py",),
    "server/access/proxies.py": ("server/test_access_parts.py",),
    "server/access/quotas.py": ("server/test_access_parts.py", "server/test_hostile_two.py"),
    "server/access/refusals.py": ("server/test_hostile_two.py",),
    "server/app.py": ("api/test_service.py", "api/test_disputes_stream.py"),
    "server/compute.py": ("server/test_dispute_jobs.py", "server/test_fair_share.py"),
    "server/config.py": ("cli/test_cli.py", "server/test_hostile_input.py"),
    "server/defaults.py": ("cli/test_cli.py", "tooling/test_layout.py"),
    "server/console.py": ("server/test_server_process.py",),
    "server/health.py": ("server/test_hostile_health.py",),
    "server/job.py": ("server/test_dispute_jobs.py", "server/test_server_process.py"),
    "server/logs.py": ("server/test_server_process.py", "server/test_hostile_metrics.py"),
    "server/metrics_http.py": ("server/test_hostile_metrics.py", "server/test_metrics.py"),
    "server/process.py": ("server/test_server_process.py",),
    "server/servicer.py": ("api/test_service.py", "api/test_disputes_stream.py"),
    "server/status.py": ("api/test_service.py", "server/test_access_parts.py"),
    "server/supervisor.py": ("server/test_scaling.py", "server/test_server_process.py"),
    "server/tls.py": ("server/test_access.py", "server/test_access_parts.py"),
    "server/warden.py": ("server/test_hostile_three.py",),
}
TESTS = ROOT / "tests"


def test_every_module_s_tests_are_found_by_its_name() -> None:
    """A module's tests are ``tests/<layer>/test_<name>.py``, or the table above names them."""
    unfound = []
    for path in MODULES.values():
        relative = path.relative_to(PACKAGE).as_posix()
        if path.name in ("__init__.py", "__main__.py") or relative.startswith("_gen/"):
            continue
        named = list(TESTS.glob(f"*/test_{path.stem}.py"))
        if not named and relative not in TESTED_BY:
            unfound.append(relative)
    assert not unfound, f"modules with no test file of their name and no entry in TESTED_BY: {unfound}"
    for relative, files in TESTED_BY.items():
        assert (PACKAGE / relative).is_file(), f"TESTED_BY names {relative}, which is gone"
        for name in files:
            assert (TESTS / name).is_file(), f"TESTED_BY[{relative!r}] names {name}, which is gone"


def test_each_test_folder_is_a_layer_and_holds_only_test_modules() -> None:
    folders = {path.name for path in TESTS.iterdir() if path.is_dir() and any(path.glob("test_*.py"))}
    assert folders == {"game", "play", "api", "server", "client", "cli", "gateway", "tooling"}
    assert not list(TESTS.glob("test_*.py")), "a test module beside the shared helpers: put it in its layer's folder"


def test_the_configuration_imports_nothing_it_configures() -> None:
    """``serve``'s configuration reads its defaults from ``defaults`` (which imports nothing of the
    project) and its flag helper; the runtime modules import the configuration, never the reverse."""
    config = {module for module, _, _ in _imports(MODULES["referee.server.config"]) if module.startswith("referee")}
    assert config <= {"referee.game.limits", "referee.server", "referee.server.defaults", "referee.server.flags"}, (
        config
    )
    names = {
        n
        for module, items, _ in _imports(MODULES["referee.server.config"])
        if module == "referee.server"
        for n in items
    }
    assert names <= {"defaults"}, names
    assert not [m for m, _, _ in _imports(MODULES["referee.server.defaults"]) if m.startswith("referee")]
