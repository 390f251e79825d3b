"""The command line, run as a real process: readable answers, --json objects, stdin mode, errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from commands import cli, cli_process


def test_solve_prints_groups_with_suit_symbols() -> None:
    run = cli("solve", "AH", "2H", "3H", "5C", "5D", "5S", "KS", "KD", "9C", "JK")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert any("A♥ 2♥ 3♥" in line and "run" in line for line in lines)
    assert any("K♦ K♠ JK" in line for line in lines)
    assert lines[-1].split() == ["unlinked:", "9♣", "points:", "9"]


def test_solve_json_carries_every_field() -> None:
    run = cli("solve", "--json", *"AH 2H 3H 5C 5D 5S KS KD 9C 4D".split())
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)
    assert answer["points"] == 33
    assert sorted(answer["unlinked"]) == ["4D", "9C", "KD", "KS"]
    assert sorted(sorted(g["cards"]) for g in answer["groups"]) == [["2H", "3H", "AH"], ["5C", "5D", "5S"]]


def test_solve_json_of_a_hand_with_no_group_still_has_every_field() -> None:
    answer = json.loads(cli("solve", "--json", "AH", "9C").stdout)
    assert answer == {"groups": [], "unlinked": ["9C", "AH"], "points": 10}  # canonical order: clubs first


def test_solve_reads_hands_from_stdin_and_goes_on_past_a_bad_line() -> None:
    run = cli("solve", "--json", stdin="AH 2H 3H\nAH XX 3H\n\nqs ks as 2s\n")
    assert run.returncode == 1  # some line was malformed
    answers = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(answers) == 3
    assert answers[0]["points"] == 0
    # A malformed line gets the MALFORMED verdict batch gives such a line: one JSON shape.
    assert answers[1]["id"] == "line:2" and answers[1]["outcome"] == "DISPUTE_OUTCOME_MALFORMED"
    assert answers[1]["error"]["field"] == "cards[1]" and answers[1]["error"]["value"] == "XX"
    assert answers[2]["points"] == 2 and answers[2]["unlinked"] == ["2S"]


def test_rule_flags_change_the_answer() -> None:
    plain = json.loads(cli("solve", "--json", "KS", "AS", "2S").stdout)
    wrapped = json.loads(cli("solve", "--json", "--wrap-runs", "KS", "AS", "2S").stdout)
    assert plain["points"] == 13 and wrapped["points"] == 0
    one = json.loads(
        cli("solve", "--json", "--joker-limit", "one_per_group", "--joker-points", "25", "7H", "JK", "JK").stdout
    )
    assert one["points"] == 25 + 7 + 25 or one["points"] == 25  # 7H JK is no group; both jokers or one left
    assert one["points"] == 57


@pytest.mark.parametrize("engine", ["cpsat", "search", "audit"])
def test_every_engine_gives_the_same_json(engine: str) -> None:
    hand = "JK JK 5H 9C KD QS 2D 6S 8H 3C".split()
    answer = json.loads(cli("solve", "--json", "--engine", engine, *hand).stdout)
    assert answer["points"] == 40
    assert [g["cards"] for g in answer["groups"]] == [["5H", "JK", "JK", "8H"]]
    assert answer["groups"][0]["stands_for"] == ["5H", "6H", "7H", "8H"]


def test_close_json_of_eleven_cards() -> None:
    run = cli("close", "--json", *"3H 4H 5H 6H JK 8H 9H 10H JH QH 2C".split())
    answer = json.loads(run.stdout)
    assert (answer["valid"], answer["kind"], answer["multiplier"], answer["discard"]) == (
        True,
        "CLOSE_KIND_STRAIGHT_FLUSH",
        5,
        "2C",
    )


def test_close_json_with_a_named_discard_and_an_invalid_one() -> None:
    good = json.loads(cli("close", "--json", "--discard", "KD", *"7H 7H 7S 7S 7D 7D 7C 7C JK JK".split()).stdout)
    assert (good["kind"], good["multiplier"], good["discard"]) == ("CLOSE_KIND_REMIGIO", 10, "KD")
    bad = json.loads(cli("close", "--json", "--discard", "4D", *"AH 2H 3H 5C 5D 5S KS KD 9C JK".split()).stdout)
    assert (bad["valid"], bad["kind"], bad["multiplier"], bad["discard"]) == (False, "CLOSE_KIND_UNSPECIFIED", 0, "4D")
    assert bad["unlinked"] == ["9C"]
    assert bad["reason"]


@pytest.mark.parametrize(
    "flag, discard, kind",
    [
        ([], "JK", "CLOSE_KIND_STRAIGHT_FLUSH_CLEAN"),
        (["--joker-discard", "clean"], "JK", "CLOSE_KIND_STRAIGHT_FLUSH_CLEAN"),
        (["--joker-discard", "NOT_CLEAN"], "AH", "CLOSE_KIND_STRAIGHT_FLUSH"),
        (["--joker-discard", "forbidden"], "AH", "CLOSE_KIND_STRAIGHT_FLUSH"),
    ],
)
def test_the_joker_discard_flag(flag: list[str], discard: str, kind: str) -> None:
    run = cli("close", "--json", *flag, *"AH 2H 3H 4H 5H 6H 7H 8H 9H 10H JK".split())
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)
    assert (answer["discard"], answer["kind"]) == (discard, kind)


def test_readable_close() -> None:
    run = cli("close", *"AH 2H 3H 4H 5H 6H 7H 8H 9H 10H KC".split())
    assert run.stdout.splitlines()[0] == "valid close: STRAIGHT_FLUSH_CLEAN ×6, discard K♣"


@pytest.mark.parametrize(
    ("cards", "discard", "says"),
    [
        ("3H 4H 5H 6H JK 8H 9H 10H JH QH", None, "name the face-down discard with --discard CARD"),
        ("3H 4H 5H 6H JK 8H 9H 10H JH QH 2C", "KD", "leave out --discard"),
        ("3H 4H 5H 6H JK 8H 9H", None, "11 cards, or 10 shown cards and --discard CARD; 7 given"),
    ],
)
def test_a_close_of_the_wrong_count_is_refused_naming_the_flag(cards: str, discard: str | None, says: str) -> None:
    # Refused input, as solve's wrong count is (and the service's INVALID_ARGUMENT): status 1.
    run = cli("close", *(["--discard", discard] if discard else []), *cards.split())
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.startswith("remigio-referee close: error: ") and says in run.stderr, run.stderr
    assert run.stderr.count("\n") == 1


def test_serve_help_shows_every_default() -> None:
    run = cli("serve", "--help")
    assert run.returncode == 0
    options = run.stdout.split("options:", 1)[1]
    # One entry per option: its lines up to the next option's.
    entries = re.split(r"\n  (?=-)", options)[1:]
    assert len(entries) > 30
    for entry in entries:
        if entry.startswith("-h, --help"):
            continue
        text = " ".join(entry.split())
        assert re.search(r"default [^ )]", text), f"no default shown: {text}"
    assert "see below" not in run.stdout
    assert "default usable cores / workers" in " ".join(run.stdout.split())


def test_keepalive_flags_reach_grpc_and_the_defaults_fit_together() -> None:
    import argparse

    from referee import client
    from referee.server.config import ConnectionLimits, ServerConfig, add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = ["--keepalive", "2.5", "--keepalive-timeout", "1", "--min-client-ping-interval", "0.2"]
    options = dict(ServerConfig.from_args(parser.parse_args(flags)).connections.options())
    assert options["grpc.keepalive_time_ms"] == 2500
    assert options["grpc.keepalive_timeout_ms"] == 1000
    assert options["grpc.http2.min_ping_interval_without_data_ms"] == 200
    # docs/operations.md, "Keepalive": the client's pings are slower than a server allows, and a
    # silent connection is found before the client's default deadline ends a call.
    assert client.KEEPALIVE_SECONDS > ConnectionLimits().min_client_ping_seconds
    assert client.KEEPALIVE_SECONDS + client.KEEPALIVE_TIMEOUT_SECONDS < client.DEFAULT_TIMEOUT


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        ("serve", "--min-client-ping-interval"),
        ("serve", "--keepalive"),
        ("serve", "--keepalive-timeout"),
        ("batch", "--keepalive"),
        ("batch", "--keepalive-timeout"),
    ],
)
def test_a_keepalive_of_zero_is_refused_naming_the_flag(command: str, flag: str, tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text("")
    args = [str(cases), "--target", "127.0.0.1:1"] if command == "batch" else []
    run = cli(command, *args, flag, "0")
    assert run.returncode == 2
    assert f"argument {flag}: must be" in run.stderr and "0" in run.stderr, run.stderr


def test_score_reads_a_deal_in_protobuf_json(tmp_path: Path) -> None:
    deal = {
        "deal": {
            "players": [
                {"name": "ana", "cards": "AH 2H 3H 4H 5C 5D 5S 9D 10D JD".split()},
                {"name": "bo", "cards": "AH 2H 3H 5C 5D 5S KS KD 9C 4D".split()},
            ],
            "closer": 0,
            "discard": "KC",
        },
        "rules": {"scoring": {"mode": "SCORING_MODE_HEAD_TO_HEAD"}},
        "claims": {"players": [{"player": 1, "points": 30}]},
    }
    path = tmp_path / "deal.json"
    path.write_text(json.dumps(deal))
    answer = json.loads(cli("score", "--json", str(path)).stdout)
    assert answer["close"]["kind"] == "CLOSE_KIND_LINKED_CLEAN"
    assert [(p["name"], p["score_change"], p["score"]) for p in answer["players"]] == [("ana", 66, 66), ("bo", 0, 0)]
    assert answer["claims"][0]["verdict"] == "VERDICT_WRONG" and answer["claims"][0]["expected"] == "33"
    assert (answer["claims"][0]["player"], answer["claims"][0]["player_name"]) == (1, "bo")
    readable = cli("score", "-", stdin=json.dumps(deal))
    assert "ana: closer, 0 points, change +66, score 66" in readable.stdout
    assert "claim claims.players[0].points (bo): WRONG (claimed 30, referee 33)" in readable.stdout


def test_a_malformed_card_exits_non_zero_naming_it() -> None:
    run = cli("solve", "AH", "ZZ", "3H")
    assert run.returncode == 1
    assert "cards[1]" in run.stderr and "ZZ" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_bad_deal_file_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "deal.json"
    path.write_text('{"deal": {"players": [{"cards": ["AH"]}], "discard": "KC"}}')
    run = cli("score", str(path))
    assert run.returncode == 1 and "deal.players" in run.stderr and "Traceback" not in run.stderr
    path.write_text("{not json")
    run = cli("score", str(path))
    assert run.returncode == 1 and "Traceback" not in run.stderr


def test_the_command_runs_as_a_process_with_its_exit_statuses() -> None:
    # The other tests run the command line in this process; this one runs the real thing.
    good = cli_process("solve", "AH", "2H", "3H")
    assert good.returncode == 0 and "points: 0" in good.stdout, good.stderr
    bad = cli_process("solve", "AH", "ZZ")
    assert bad.returncode != 0 and "ZZ" in bad.stderr and "Traceback" not in bad.stderr
    usage = cli_process("solve", "--no-such-flag")
    assert usage.returncode == 2 and len(usage.stderr.strip().splitlines()) <= 3


# docs/commands.md, "Exit status": one convention, a case per way a command can end.
RECORD = "[Seats ana beto]\n1. S 3H\n"  # a record missing its deck: refused input
CONVENTION = [
    # (arguments, stdin, status, what stderr starts with)
    (["solve", "AH", "2H"], "", 0, ""),
    (["close", *"3H 4H 5H 6H JK 8H 9H 10H JH QH 2C".split()], "", 0, ""),
    (["close", *"AH 2C 3D 4S 5H 6C 7D 8S 9H 10C JD".split()], "", 0, ""),  # an invalid close: a verdict
    (["solve", *"AH 2H 3H 4H 5H 6H 7H 8H 9H 10H JH QH".split()], "", 1, "remigio-referee solve: error: cards: "),
    (["solve", "AH", "ZZ"], "", 1, "remigio-referee solve: error: cards[1]: "),
    (["close", *"3H 4H 5H 6H JK 8H 9H".split()], "", 1, "remigio-referee close: error: cards: "),
    (["close", "--discard", "ZZ", *"3H 4H 5H 6H JK 8H 9H 10H JH QH".split()], "", 1, "remigio-referee close: error: "),
    (["score", "-"], "{", 1, "remigio-referee score: error: "),
    (["replay", "-"], RECORD, 1, "remigio-referee replay: error: "),
    (["review", "-"], RECORD, 1, "remigio-referee review: error: "),
    (["solve"], "AH 2H 3H\nAH ZZ\n", 1, ""),  # stdin mode: the bad line reported on stdout
    (["solve", "--json"], "AH 2H 3H\nAH ZZ\n", 1, ""),
    (["score", "/nonexistent/deal.json"], "", 2, "remigio-referee score: cannot read"),
    (["replay", "/nonexistent/deal.txt"], "", 2, "remigio-referee replay: cannot read"),
    (["review", "/nonexistent/deal.txt"], "", 2, "remigio-referee review: cannot read"),
    (["solve", "--svg", "x.svg"], "AH\n", 2, "remigio-referee solve: --svg draws one hand"),
    (["solve", "--no-such-flag", "AH"], "", 2, "usage: remigio-referee"),
]


@pytest.mark.parametrize(("args", "stdin", "status", "says"), CONVENTION, ids=[" ".join(c[0])[:40] for c in CONVENTION])
def test_every_command_ends_by_one_convention(args: list[str], stdin: str, status: int, says: str) -> None:
    run = cli(*args, stdin=stdin)
    assert run.returncode == status, (run.stdout, run.stderr)
    if status == 0:
        assert run.stderr == "" and run.stdout
    elif says.startswith("usage:"):
        assert run.stderr.startswith(says)
    elif says:
        assert run.stderr.startswith(says) and run.stderr.count("\n") == 1, run.stderr
        assert run.stdout == ""
    else:  # stdin mode: the good line answered, the bad one reported in its place
        lines = run.stdout.splitlines()
        assert len(lines) == 2 and "ZZ" in lines[1] and run.stderr == ""
