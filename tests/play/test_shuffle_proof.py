"""What a record proves about its deck order (a committed shuffle, a seeded one with no
commitment, an explicit deck), said by every way out, and refused when only committed deals may
be judged: the domain, the fast lane, the command line, a real server and its dispute jobs, the
report and the desk."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from servers import ROOT, ServerProcess

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.api import handlers, jsonmsg, records
from referee.api.disputes import judge_case
from referee.api.record_lines import judge_record, read_record_case
from referee.game.rules import Engine, RuleSet
from referee.play.record import Record, format_notation
from referee.play.replay import ViolationCode, replay
from referee.play.shuffle import ShuffleProof
from referee.play.simulate import simulate

RULES = RuleSet(engine=Engine.SEARCH)


def _records() -> dict[ShuffleProof, Record]:
    """One deal three ways: committed, seeded without the commitment, and its deck stated."""
    committed = simulate(11, 3, RULES)
    assert committed.shuffle is not None and committed.shuffle.server_seed_hash is not None
    uncommitted = replace(committed, shuffle=replace(committed.shuffle, server_seed_hash=None))
    explicit = replace(committed, shuffle=None, deck=committed.deck_order())
    return {
        ShuffleProof.COMMITTED: committed,
        ShuffleProof.UNCOMMITTED: uncommitted,
        ShuffleProof.EXPLICIT_DECK: explicit,
    }


@pytest.fixture(autouse=True)
def _any_shuffle_after() -> object:
    yield
    handlers.require_committed_shuffles(False)  # the process's setting, as each test found it


@pytest.mark.parametrize("proof", list(ShuffleProof), ids=lambda p: p.name)
def test_a_replay_says_what_the_record_proves_and_committed_only_refuses_the_rest(proof: ShuffleProof) -> None:
    record = _records()[proof]
    assert record.shuffle_proof is proof
    played = replay(record)
    assert played.legal and played.shuffle_proof is proof
    strict = replay(record, committed_only=True)
    assert strict.shuffle_proof is proof
    if proof is ShuffleProof.COMMITTED:
        assert strict == played
    else:
        assert strict.violation is not None and strict.violation.code is ViolationCode.UNCOMMITTED_SHUFFLE
        assert (strict.violation.turn, strict.turns_played, strict.stock) == (0, 0, ())
        assert strict.violation.message.startswith(f"the deal, dealt by {record.seats[record.dealer].name}: ")


def test_a_seed_off_its_commitment_is_still_seed_mismatch_and_says_so() -> None:
    committed = _records()[ShuffleProof.COMMITTED]
    assert committed.shuffle is not None
    wrong = replace(committed, shuffle=replace(committed.shuffle, server_seed_hash="0" * 64))
    for strict in (False, True):
        played = replay(wrong, committed_only=strict)
        assert played.violation is not None and played.violation.code is ViolationCode.SEED_MISMATCH
    assert "does not match" in ShuffleProof.COMMITTED.sentence(seed_mismatch=True)


@pytest.mark.parametrize("strict", [False, True], ids=["any", "committed only"])
def test_the_fast_lane_and_the_message_way_agree_byte_for_byte(strict: bool) -> None:
    handlers.require_committed_shuffles(strict)
    for number, (proof, record) in enumerate(_records().items()):
        request = records.request_of(record)
        line = json.dumps({"id": f"c{number}", "record": jsonmsg.to_dict(request)}, separators=(",", ":"))
        case, turns = read_record_case(line)
        fast = judge_record(case, turns)
        slow = jsonmsg.to_json(judge_case(jsonmsg.parse(line, pb.CheckDisputesRequest())))
        assert fast == slow, proof
        verdict = json.loads(slow)
        assert verdict["record"]["shuffle_proof"] == f"SHUFFLE_PROOF_{proof.name}"


def _remigio(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "referee.cli", *args], cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=60
    )


def test_the_command_line_says_it_and_refuses_on_request(tmp_path: Path) -> None:
    files = {}
    for proof, record in _records().items():
        files[proof] = tmp_path / f"{proof.name}.rec"
        files[proof].write_text(format_notation(record), encoding="utf-8")
    for proof, path in files.items():
        said = _remigio("replay", str(path))
        assert said.returncode == 0 and proof.sentence() in said.stdout, said
        answer = json.loads(_remigio("replay", "--json", str(path)).stdout)
        assert answer["shuffle_proof"] == f"SHUFFLE_PROOF_{proof.name}" and answer["legal"] is True
        strict = json.loads(_remigio("replay", "--json", "--require-committed-shuffle", str(path)).stdout)
        assert strict["legal"] is (proof is ShuffleProof.COMMITTED), strict.get("violation")
    # batch, in local processes (forked after the option is set), and refused with --target.
    cases = tmp_path / "cases.jsonl"
    cases.write_text(
        "".join(
            json.dumps({"id": proof.name, "record": jsonmsg.to_dict(records.request_of(record))}) + "\n"
            for proof, record in _records().items()
        ),
        encoding="utf-8",
    )
    ran = _remigio("batch", str(cases), "--jobs", "2", "--require-committed-shuffle")
    verdicts = {v["id"]: v for v in map(json.loads, ran.stdout.splitlines())}
    assert verdicts["COMMITTED"]["outcome"] == "DISPUTE_OUTCOME_NO_CLAIM", verdicts["COMMITTED"]
    for name in ("UNCOMMITTED", "EXPLICIT_DECK"):
        assert verdicts[name]["outcome"] == "DISPUTE_OUTCOME_ILLEGAL"
        assert verdicts[name]["record"]["violation"]["code"] == "VIOLATION_CODE_UNCOMMITTED_SHUFFLE"
    refused = _remigio("batch", str(cases), "--target", "127.0.0.1:1", "--require-committed-shuffle")
    assert refused.returncode == 2 and "--require-committed-shuffle judges locally" in refused.stderr
    # The report says it beside each record's drawing.
    report = tmp_path / "report.html"
    _remigio("batch", str(cases), "--report", str(report))
    page = report.read_text(encoding="utf-8")
    for proof in ShuffleProof:
        assert proof.sentence() in page, proof


def test_a_server_with_the_option_refuses_uncommitted_records_in_calls_and_dispute_jobs() -> None:
    server = ServerProcess("--port", "0", "--require-committed-shuffle", "--dispute-jobs", "2").listening()
    try:
        with grpc.insecure_channel(server.address) as channel:
            stub = referee_pb2_grpc.RefereeServiceStub(channel)
            cases = []
            for proof, record in _records().items():
                reply = stub.ReplayDeal(records.request_of(record), timeout=30)
                assert pb.ShuffleProof.Name(reply.shuffle_proof) == f"SHUFFLE_PROOF_{proof.name}"
                if proof is ShuffleProof.COMMITTED:
                    assert reply.legal
                else:
                    assert pb.ViolationCode.Name(reply.violation.code) == "VIOLATION_CODE_UNCOMMITTED_SHUFFLE"
                cases.append(pb.CheckDisputesRequest(id=proof.name, record=records.request_of(record)))
            # The dispute jobs are processes of their own: they hold to the server's option too.
            verdicts = {v.id: v for v in stub.CheckDisputes(iter(cases), timeout=60)}
            assert verdicts["COMMITTED"].record.legal
            for name in ("UNCOMMITTED", "EXPLICIT_DECK"):
                code = verdicts[name].record.violation.code
                assert pb.ViolationCode.Name(code) == "VIOLATION_CODE_UNCOMMITTED_SHUFFLE", name
    finally:
        server.kill()


def test_the_drawing_of_a_replay_says_what_the_record_proves_and_the_desk_shows_that_drawing() -> None:
    from referee import render

    for proof, record in _records().items():
        assert proof.sentence() in render.replay_svg(replay(record)), proof
    # The desk draws nothing itself (DrawAnswer does): no sentence of its own to drift.
    script = (ROOT / "gateway" / "desk.js").read_text(encoding="utf-8")
    assert "SHUFFLE_PROOF_" not in script and "/v1/answers:draw" in script
