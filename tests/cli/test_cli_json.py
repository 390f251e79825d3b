"""One JSON shape: every JSON the command line writes parses back with protobuf's own parser into
the contract's message, field for field; usage errors exit 2 with one line, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from commands import cli
from google.protobuf import json_format
from google.protobuf.message import Message

from referee._gen.remigio.referee.v1 import referee_pb2 as pb


def parses_back(line: str, message: type[Message]) -> Message:
    """The line parsed by json_format into ``message``, which prints back as the same JSON object."""
    parsed = json_format.Parse(line, message())
    again = json_format.MessageToDict(
        parsed, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
    )
    assert again == json.loads(line)
    return parsed


@pytest.mark.parametrize(
    "args",
    [
        ["AH", "2H", "3H", "5C", "5D", "5S", "KS", "KD", "9C", "JK"],
        ["AH", "9C"],
        ["--joker-limit", "ONE_PER_GROUP", "--joker-discard", "FORBIDDEN", "7H", "JK", "JK"],
    ],
)
def test_solve_json_parses_back_as_a_linking(args: list[str]) -> None:
    run = cli("solve", "--json", *args)
    assert run.returncode == 0, run.stderr
    parses_back(run.stdout, pb.Linking)


def test_solve_json_from_stdin_parses_back_line_by_line() -> None:
    run = cli("solve", "--json", stdin="AH 2H 3H\nAH XX 3H\n\nqs ks as 2s\n")
    lines = run.stdout.splitlines()
    assert len(lines) == 3
    parses_back(lines[0], pb.Linking)
    verdict = parses_back(lines[1], pb.CheckDisputesResponse)
    assert isinstance(verdict, pb.CheckDisputesResponse)
    assert (verdict.id, verdict.outcome, verdict.error.field) == ("line:2", pb.DISPUTE_OUTCOME_MALFORMED, "cards[1]")
    parses_back(lines[2], pb.Linking)


@pytest.mark.parametrize(
    "args",
    [
        "3H 4H 5H 6H JK 8H 9H 10H JH QH 2C".split(),
        ["--discard", "KD", *"7H 7H 7S 7S 7D 7D 7C 7C JK JK".split()],
        ["--discard", "4D", *"AH 2H 3H 5C 5D 5S KS KD 9C JK".split()],  # invalid: no kind
        "AH 2H 3H 5H 7H 8H 9H JH QH KH 4C".split(),  # a color with a card unlinked
        "2C 9D 4S 7H KH QC 5D JS 3H 8C 6S".split(),  # nothing closes
    ],
)
def test_close_json_parses_back_as_a_close(args: list[str]) -> None:
    run = cli("close", "--json", *args)
    assert run.returncode == 0, run.stderr
    close = parses_back(run.stdout, pb.Close)
    assert isinstance(close, pb.Close)
    if not close.valid:
        assert close.kind == pb.CLOSE_KIND_UNSPECIFIED


def test_score_json_parses_back_as_a_scored_deal(tmp_path: Path) -> None:
    request = {
        "deal": {
            "players": [
                {"name": "ana", "cards": "AH 2H 3H 5H 7H 8H 9H JH QH KH".split()},
                {"name": "bo", "cards": "AC 2C 3C 5D 5S 5C KS KD 9C 4D".split()},
            ],
            "closer": 0,
            "discard": "4C",
        },
        "claims": {"players": [{"player": 0, "points": 5}]},
    }
    path = tmp_path / "deal.json"
    path.write_text(json.dumps(request))
    run = cli("score", "--json", str(path))
    assert run.returncode == 0, run.stderr
    reply = parses_back(run.stdout, pb.ScoreDealResponse)
    assert isinstance(reply, pb.ScoreDealResponse)
    assert reply.players[0].points == reply.players[0].linking.points == 5
    assert reply.claims[0].verdict == pb.VERDICT_CONFIRMED and reply.claims[0].expected == "5"


def test_batch_output_parses_back_verdict_by_verdict(tmp_path: Path) -> None:
    cases = [
        {"id": "h", "hand": {"cards": "AH 2H 3H 4H 5H 6H 7H 8H 9H 10H JH".split(), "claimed_points": 0}},
        {
            "id": "c",
            "close": {"cards": "AH 2H 3H 5C 5D 5S KS KD 9C 4D QD".split(), "claimed_kind": "CLOSE_KIND_UNSPECIFIED"},
        },
        {"id": "bad", "hand": {"cards": ["ZZ"]}},
    ]
    source = tmp_path / "cases.jsonl"
    source.write_text("\n".join(json.dumps(c) for c in cases) + "\n{not json\n")
    run = cli("batch", str(source), "--jobs", "1")
    assert run.returncode == 3, run.stderr  # judged, some MALFORMED
    lines = run.stdout.splitlines()
    assert len(lines) == 4
    verdicts = [parses_back(line, pb.CheckDisputesResponse) for line in lines]
    assert [v.id for v in verdicts] == ["h", "c", "bad", "line:4"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "args, says",
    [
        (["batch", "missing.jsonl"], "cannot read missing.jsonl"),
        (["score", "missing.json"], "cannot read missing.json"),
    ],
)
def test_a_file_that_cannot_be_read_is_a_usage_error(args: list[str], says: str) -> None:
    run = cli(*args)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and says in run.stderr
    assert "Traceback" not in run.stderr and not run.stdout


def test_an_output_that_cannot_be_written_is_a_usage_error(tmp_path: Path) -> None:
    source = tmp_path / "cases.jsonl"
    source.write_text('{"id": "a", "hand": {"cards": ["AH"]}}\n')
    run = cli("batch", str(source), "-o", str(tmp_path / "no" / "such" / "dir.jsonl"))
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and "cannot write" in run.stderr
    assert "Traceback" not in run.stderr
