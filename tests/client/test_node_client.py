"""A client in another language: Node.js with @grpc/grpc-js, the contract loaded from protos/ at run
time (``tests/clients/node_client.js``), as a real process against the session's real server.

Its replies must equal, field for field, what the Python stub gets for the same requests, and a
malformed request must reach it as INVALID_ARGUMENT naming the field. ``make test`` installs the
two npm packages into .tools beside buf; without node or those packages the tests skip, saying which.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from google.protobuf.message import Message

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.api.convert import deal_to_proto
from referee.api.records import request_of
from referee.game.rules import Engine, RuleSet
from referee.game.samples import sample_deals
from referee.play.record import Record, Seat
from referee.play.shuffle import Shuffle
from referee.play.simulate import simulate

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / ".tools" / "node_modules"
CLIENT = ROOT / "tests" / "clients" / "node_client.js"


def _first_deal(seed: int) -> pb.Deal:
    """A deal at the start of a match: every score unset."""
    deal = deal_to_proto(sample_deals(seed, 1)[0])
    for player in deal.players:
        player.ClearField("score")
    return deal


CALLS: list[tuple[str, Message]] = [
    ("SolveHand", pb.SolveHandRequest(cards="AH 2H 3H 5C 5D 5S KS KD 9C JK".split())),
    (
        "SolveHand",
        pb.SolveHandRequest(
            cards="QS KS AS 2S 3S JK JK 7D 7C 9D".split(),
            rules=pb.RuleOptions(wrap_runs=True, joker_limit=pb.JOKER_LIMIT_ONE_PER_GROUP, joker_points=25),
        ),
    ),
    (
        "CheckClose",
        pb.CheckCloseRequest(
            cards="3H 4H 5H 6H JK 8H 9H 10H JH QH 2C".split(), claimed_kind=pb.CLOSE_KIND_STRAIGHT_FLUSH
        ),
    ),
    ("CheckClose", pb.CheckCloseRequest(cards="7H 7H 7S 7S 7D 7D 7C 7C JK JK".split(), discard="KD")),
    ("ScoreDeal", pb.ScoreDealRequest(deal=deal_to_proto(sample_deals(11, 1)[0]))),
    (
        "ScoreDeal",
        pb.ScoreDealRequest(
            deal=_first_deal(12),
            rules=pb.RuleOptions(scoring=pb.ScoringOptions(mode=pb.SCORING_MODE_ELIMINATION)),
            claims=pb.DealClaims(multiplier=2, players=[pb.PlayerClaim(player=1, points=30)]),
        ),
    ),
    # Deal records: a seeded deal not played yet, whose hands depend on a nonce beyond 2^53 (no
    # JavaScript number holds it), and a deal played from an explicit deck, with a claim.
    (
        "ReplayDeal",
        request_of(
            Record(
                seats=(Seat("ana"), Seat("beto"), Seat("carla")),
                dealer=2,
                shuffle=Shuffle("3c" * 32, "ñandú", 2**64 - 2),
                rules=RuleSet(engine=Engine.SEARCH),
            )
        ),
    ),
    (
        "ReplayDeal",
        request_of(simulate(6, 4, RuleSet(engine=Engine.SEARCH), seeded=False), pb.DealClaims(multiplier=1)),
    ),
]


def node_binary() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed")
    if not (NODE_MODULES / "@grpc" / "grpc-js").is_dir() or not (NODE_MODULES / "@grpc" / "proto-loader").is_dir():
        pytest.skip("the Node.js gRPC packages are not installed in .tools (`make buf` installs them)")
    return node


def _run_node(address: str, calls: list[tuple[str, Message]]) -> list[dict[str, Any]]:
    lines = "".join(
        json.dumps({"method": method, "request": json_format.MessageToDict(request, preserving_proto_field_name=True)})
        + "\n"
        for method, request in calls
    )
    env = {**os.environ, "NODE_PATH": str(NODE_MODULES)}
    done = subprocess.run(
        [node_binary(), str(CLIENT), address],
        input=lines,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _without_nulls(value: Any) -> Any:
    """proto-loader writes an unset message field as null; protobuf's JSON leaves it out."""
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def test_a_node_client_gets_the_replies_a_python_client_gets(
    server_address: str, stub: referee_pb2_grpc.RefereeServiceStub
) -> None:
    answers = _run_node(server_address, CALLS)
    assert len(answers) == len(CALLS)
    for (method, request), answer in zip(CALLS, answers):
        assert "reply" in answer, (method, answer)
        expected = json_format.MessageToDict(
            getattr(stub, method)(request, timeout=30),
            preserving_proto_field_name=True,
            always_print_fields_with_no_presence=True,
        )
        assert _without_nulls(answer["reply"]) == expected, method


def test_a_node_client_gets_invalid_argument_naming_the_field(server_address: str) -> None:
    (answer,) = _run_node(server_address, [("SolveHand", pb.SolveHandRequest(cards=["AH", "XX", "3H"]))])
    assert answer["code"] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "cards[1]" in answer["details"] and "XX" in answer["details"]
