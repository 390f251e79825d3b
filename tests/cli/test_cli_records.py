"""The deal record commands: ``replay`` (readable, --json, --notation), ``shuffle`` against the
test vectors of docs/records.md, and ``simulate`` round-tripping through ``replay``.

Most runs call the command line in this process (``referee.cli.main``); a few run it as a real
process, piped as a user would.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from commands import ROOT, cli
from google.protobuf import json_format

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api.handlers import replay_deal
from referee.api.records import request_of
from referee.cli import main
from referee.play.record import format_notation, parse_notation

RECORDS_MD = (ROOT / "docs" / "records.md").read_text(encoding="utf-8")
FENCE = re.compile(r"^```text\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _section(heading: str) -> str:
    start = RECORDS_MD.index(f"\n{heading}\n")
    following = RECORDS_MD.find("\n#", start + len(heading) + 2)
    return RECORDS_MD[start : following if following != -1 else len(RECORDS_MD)]


# The notation's first example: beto takes ana's JH and closes on turn 8, LINKED ×1, gaining 59.
EXAMPLE = FENCE.findall(_section("## The notation"))[0]


def run(capsys: pytest.CaptureFixture[str], *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """``remigio-referee ARGS`` in this process: its status, stdout and stderr."""
    with pytest.MonkeyPatch.context() as patch:
        if stdin is not None:
            patch.setattr("sys.stdin", io.StringIO(stdin))
        try:
            status = main(list(args))
        except SystemExit as exit_:  # argparse's own usage errors
            status = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def test_replay_tells_a_legal_deal_its_state_and_its_score(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "deal.txt"
    path.write_text(EXAMPLE, encoding="utf-8")
    status, out, _ = run(capsys, "replay", str(path))
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "legal: complete in 8 turns; beto closed laying 4♦ face down"
    assert any(line.split()[:1] == ["beto"] and line.endswith("(closer: shown)") for line in lines)
    assert "valid close: LINKED ×1, discard 4♦" in lines
    assert "beto: closer, 0 points, change +59, score 380" in lines
    assert "ana: 10 points, change -10, score 452" in lines


def test_replay_tells_a_violation_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    # Turn 5: beto throws the 7 of spades, which he does not hold.
    text = EXAMPLE.replace("5. @beto S=6S 6S", "5. @beto S=6S 7S")
    status, out, _ = run(capsys, "replay", "-", stdin=text)
    assert status == 0  # a violation is an answer, not an error
    lines = out.splitlines()
    assert lines[0].startswith("illegal: turn 5, beto: discards 7S, which is not in their hand (they hold ")
    assert lines[1] == "  CARD_NOT_IN_HAND; 4 turns played legally before it"
    assert "the state before it:" in lines and "valid close" not in out


def test_replay_json_is_the_reply_of_the_service(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "replay", "--json", "-", stdin=EXAMPLE)
    assert status == 0
    printed = json_format.Parse(out, pb.ReplayDealResponse())
    assert printed == replay_deal(request_of(parse_notation(EXAMPLE)))
    assert printed.complete and printed.result.players[1].score == 380


def test_replay_reads_a_request_or_a_bare_record_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    request = request_of(parse_notation(EXAMPLE))
    for text in (json_format.MessageToJson(request), json_format.MessageToJson(request.record)):
        status, out, _ = run(capsys, "replay", "--json", "-", stdin=text)
        assert status == 0
        assert json_format.Parse(out, pb.ReplayDealResponse()) == replay_deal(request)


def test_replay_notation_writes_the_record_back(capsys: pytest.CaptureFixture[str]) -> None:
    # Lenient spellings in, the canonical notation out; from the JSON of the request, the same.
    lenient = EXAMPLE.replace("3. S KC", "3. s kc ; a comment")
    status, out, _ = run(capsys, "replay", "--notation", "-", stdin=lenient)
    assert status == 0 and out == format_notation(parse_notation(EXAMPLE)) == EXAMPLE
    as_json = json_format.MessageToJson(request_of(parse_notation(EXAMPLE)))
    assert run(capsys, "replay", "--notation", "-", stdin=as_json)[1] == EXAMPLE


def test_replay_rule_flags_override_the_records_rules(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "replay", "--notation", "--discard-taken", "forbidden", "-", stdin=EXAMPLE)
    assert status == 0 and out.splitlines()[0] == '[DiscardTaken "FORBIDDEN"]'
    # Turn 2 takes ana's 10D and throws 6C: no violation under either option.
    status, out, _ = run(capsys, "replay", "--json", "--discard-taken", "forbidden", "-", stdin=EXAMPLE)
    assert json.loads(out)["legal"] is True


def _vector(title: str) -> dict[str, str]:
    (block,) = FENCE.findall(_section(f"### {title}"))
    fields = dict(re.findall(r"^(\w[\w ]*?): (.*)$", block, re.MULTILINE))
    fields["dealt"] = block.split("dealt (top first):\n", 1)[1]
    return fields


@pytest.mark.parametrize("title", ["Two decks", "Three decks"])
def test_shuffle_prints_the_documented_vectors(capsys: pytest.CaptureFixture[str], title: str) -> None:
    vector = _vector(title)
    args = ["--server-seed", vector["server_seed"], "--client-seed", json.loads(vector["client_seed"])]
    status, out, _ = run(capsys, "shuffle", *args, "--nonce", vector["nonce"], "--decks", vector["decks"])
    assert status == 0
    head, dealt = out.split("dealt (top first):\n")
    assert dealt == vector["dealt"]
    for name in ("server_seed", "server_seed_hash", "client_seed", "nonce", "decks"):
        assert f"{name}: {vector[name]}\n" in head


@pytest.mark.parametrize(
    "args",
    [
        ["--players", "4", "--seed", "9"],
        ["--players", "2", "--seed", "3", "--explicit-deck", "--discard-taken", "forbidden", "--decks", "1"],
        ["--players", "10", "--seed", "5", "--joker-limit", "one_per_group", "--max-turns", "12"],
    ],
)
def test_simulate_round_trips_through_replay(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    status, notation, _ = run(capsys, "simulate", *args)
    assert status == 0
    status, as_json, _ = run(capsys, "simulate", "--json", *args)
    assert status == 0 and len(as_json.splitlines()) == 1
    assert run(capsys, "replay", "--notation", "-", stdin=as_json)[1] == notation
    status, out, _ = run(capsys, "replay", "--json", "-", stdin=notation)
    reply = json_format.Parse(out, pb.ReplayDealResponse())
    assert reply.legal and reply.turns_played == len(parse_notation(notation).turns)
    assert reply.complete == ("--max-turns" not in args)
    if "--explicit-deck" in args:
        assert "[Deck " in notation and '[DiscardTaken "FORBIDDEN"]' in notation


def test_simulate_writes_a_file_the_replay_reads(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "deal.txt"
    assert run(capsys, "simulate", "--players", "3", "--seed", "7", "-o", str(path)) == (0, "", "")
    status, out, _ = run(capsys, "replay", str(path))
    assert status == 0 and out.startswith("legal: complete in ")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["shuffle", "--server-seed", "zz"], "remigio-referee shuffle: --server-seed: a server seed must be 64 hex"),
        (["shuffle", "--server-seed", "ab" * 32, "--decks", "5"], "remigio-referee shuffle: --decks must be 1 to 4"),
        (["shuffle", "--server-seed", "ab" * 32, "--nonce", "-1"], "remigio-referee shuffle: --nonce: a nonce must"),
        (["simulate", "--players", "1", "--seed", "1"], "remigio-referee simulate: --players must be 2 to 10"),
        (
            ["simulate", "--players", "2", "--seed", "1", "-o", "/nonexistent/deal.txt"],
            "remigio-referee simulate: cannot write",
        ),
        (["replay", "/nonexistent/deal.txt"], "remigio-referee replay: cannot read /nonexistent/deal.txt"),
        (["replay", "--json", "--notation", "-"], "remigio-referee replay: --json and --notation"),
        (["review", "/nonexistent/deal.txt"], "remigio-referee review: cannot read /nonexistent/deal.txt"),
    ],
)
def test_usage_errors_exit_2_with_one_line(capsys: pytest.CaptureFixture[str], args: list[str], says: str) -> None:
    status, out, err = run(capsys, *args)
    assert (status, out) == (2, "")
    assert len(err.splitlines()) == 1 and err.startswith(says), err


def test_a_malformed_record_is_an_error_naming_its_line_or_field(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "replay", "-", stdin=EXAMPLE.replace("6. S=JH JH", "6. S=JH XX"))
    assert status == 1 and err.startswith("remigio-referee replay: error: line 16: ") and "XX" in err
    request = request_of(parse_notation(EXAMPLE))
    request.record.dealer = 9
    status, _, err = run(capsys, "replay", "-", stdin=json_format.MessageToJson(request))
    assert status == 1 and err.startswith("remigio-referee replay: error: record.dealer: ")


def test_simulate_piped_into_replay_as_real_processes() -> None:
    made = cli("simulate", "--players", "4", "--seed", "21", "--json")
    assert made.returncode == 0, made.stderr
    replayed = cli("replay", "-", stdin=made.stdout)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.startswith("legal: complete in ")


def test_replay_draws_the_deal_with_svg(tmp_path) -> None:
    import xml.etree.ElementTree as ElementTree

    record = tmp_path / "deal.txt"
    assert cli("simulate", "--players", "3", "--seed", "5", "-o", str(record)).returncode == 0
    picture = tmp_path / "deal.svg"
    run = cli("replay", str(record), "--svg", str(picture))
    assert run.returncode == 0, run.stderr
    root = ElementTree.fromstring(picture.read_text(encoding="utf-8"))
    assert root.tag.endswith("svg") and root.find("{http://www.w3.org/2000/svg}title") is not None


def test_review_annotates_each_turn_and_sums_up_each_seat(capsys: pytest.CaptureFixture[str]) -> None:
    from referee.api.handlers import review_deal

    status, out, _ = run(capsys, "review", "-", stdin=EXAMPLE)
    assert status == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["player", "accuracy", "decisions"]
    request = request_of(parse_notation(EXAMPLE))
    reviewed = review_deal(pb.ReviewDealRequest(record=request.record, rules=request.rules))
    # One line a seat, then one a turn, each naming its player and its throw (or CLOSE).
    for seat in reviewed.seats:
        assert any(line.split()[:1] == [seat.name] for line in lines[1 : 1 + len(reviewed.seats)])
    turns = [line for line in lines if re.match(r"^\s*\d+\. ", line)]
    assert len(turns) == len(reviewed.turns) == 8
    assert turns[-1].split()[1] == "beto" and turns[-1].split()[2:4] == ["DISCARD", "CLOSE"]
    # A marked decision names the better choice and the loss.
    for turn, line in zip(reviewed.turns, turns, strict=True):
        marks = [mark for decision in turn.decisions for mark in decision.marks]
        marked = pb.REVIEW_MARK_MISTAKE in marks or pb.REVIEW_MARK_BLUNDER in marks
        assert ("better " in line) >= marked, line
    assert lines[-1].startswith("Evidence for a person to weigh")


def test_review_json_is_the_reply_of_the_service_and_an_illegal_record_is_not_reviewed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from referee.api.handlers import review_deal

    status, out, _ = run(capsys, "review", "--json", "-", stdin=EXAMPLE)
    assert status == 0
    request = request_of(parse_notation(EXAMPLE))
    expected = review_deal(pb.ReviewDealRequest(record=request.record, rules=request.rules))
    assert json_format.Parse(out, pb.ReviewDealResponse()) == expected
    status, out, _ = run(capsys, "review", "-", stdin=EXAMPLE.replace("5. @beto S=6S 6S", "5. @beto S=6S 7S"))
    assert status == 0  # a violation is an answer
    assert out.startswith("not reviewed: illegal: turn 5, beto: discards 7S") and "CARD_NOT_IN_HAND" in out
