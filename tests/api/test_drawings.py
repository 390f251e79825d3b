"""DrawAnswer over real gRPC: the referee's one drawing. Each question's pictures are the bytes
``referee.render`` draws for the domain's own answer, the command line's ``--svg`` writes the
same bytes, the dispute report draws a case as DrawAnswer does, and a malformed question is
INVALID_ARGUMENT naming its field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import grpc
import pytest
from commands import ROOT, cli
from servers import field_violation
from test_replay import INJECTIONS

from referee import render
from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.api import drawings, jsonmsg, records
from referee.api.disputes import judge_case
from referee.cli.report import Report
from referee.game.cards import parse_cards
from referee.game.closing import best_close
from referee.game.linking import best_linking
from referee.game.rules import Engine, RuleSet
from referee.play.review import review_deal
from referee.play.simulate import simulate

Stub = referee_pb2_grpc.RefereeServiceStub
HAND = "AH 2H 3H 5C 5D 5S KS KD 9C JK".split()
CLOSE = "3H 4H 5H 6H JK 8H 9H 10H JH QH 2C".split()
SEARCH = RuleSet(engine=Engine.SEARCH)


def test_a_hand_and_a_close_are_drawn_as_render_draws_the_domains_answer(stub: Stub) -> None:
    rules = pb.RuleOptions(engine=pb.ENGINE_SEARCH)
    solved = stub.DrawAnswer(pb.DrawAnswerRequest(solve_hand=pb.SolveHandRequest(cards=HAND, rules=rules)), timeout=30)
    ((picture,),) = [solved.drawings]
    assert picture.caption == "The best linking"
    assert picture.svg == render.linking_svg(best_linking(parse_cards(HAND), SEARCH))
    checked = stub.DrawAnswer(
        pb.DrawAnswerRequest(check_close=pb.CheckCloseRequest(cards=CLOSE, rules=rules)), timeout=30
    )
    (picture,) = checked.drawings
    close = best_close(parse_cards(CLOSE), SEARCH)
    # The close's reply carries no points for the shown cards; nor does its drawing.
    assert "STRAIGHT FLUSH" in picture.svg and picture.svg.count('class="card') == 11
    assert close.valid


def test_the_command_lines_svg_is_the_same_drawing(stub: Stub, tmp_path: Path) -> None:
    for args, question in (
        (["solve", "--engine", "search", *HAND], pb.DrawAnswerRequest(solve_hand=pb.SolveHandRequest(cards=HAND))),
        (["close", "--engine", "search", *CLOSE], pb.DrawAnswerRequest(check_close=pb.CheckCloseRequest(cards=CLOSE))),
    ):
        path = tmp_path / "drawing.svg"
        assert cli(args[0], "--svg", str(path), *args[1:]).returncode == 0
        getattr(question, question.WhichOneof("question")).rules.engine = pb.ENGINE_SEARCH
        assert path.read_text(encoding="utf-8") == stub.DrawAnswer(question, timeout=30).drawings[0].svg
    deal = jsonmsg.parse((ROOT / "examples" / "deal.json").read_text(encoding="utf-8"), pb.ScoreDealRequest())
    path = tmp_path / "deal.svg"
    assert cli("score", "--svg", str(path), str(ROOT / "examples" / "deal.json")).returncode == 0
    assert (
        path.read_text(encoding="utf-8")
        == stub.DrawAnswer(pb.DrawAnswerRequest(score_deal=deal), timeout=30).drawings[0].svg
    )


def test_a_record_is_drawn_replayed_and_scored_and_its_review_turn_by_turn(stub: Stub) -> None:
    record = simulate(7, 3, SEARCH)
    request = records.request_of(record)
    replayed = stub.DrawAnswer(pb.DrawAnswerRequest(replay_deal=request), timeout=30)
    assert [p.caption for p in replayed.drawings] == ["The deal as replayed", "The deal scored"]
    review = pb.ReviewDealRequest(record=request.record, rules=request.rules)
    reviewed = stub.DrawAnswer(pb.DrawAnswerRequest(review_deal=review), timeout=60)
    (picture,) = reviewed.drawings
    assert picture.caption == "The review"
    assert picture.svg == render.review_svg(record, review_deal(record))
    # The turns asked for, and no other.
    chosen = stub.DrawAnswer(pb.DrawAnswerRequest(review_deal=review, turns=[2, 5]), timeout=60).drawings[0].svg
    assert re.findall(r"Turn (\d+), ", chosen) == ["2", "5"]


def test_an_illegal_record_is_drawn_at_its_violation_not_reviewed(stub: Stub) -> None:
    import random

    from played import corpus

    rng = random.Random("drawings")
    made = next(m for m in (INJECTIONS[code](p, rng) for p in corpus() for code in list(INJECTIONS)[2:3]) if m)
    record, turn = made
    request = records.request_of(record)
    review = pb.ReviewDealRequest(record=request.record, rules=request.rules)
    (picture,) = stub.DrawAnswer(pb.DrawAnswerRequest(review_deal=review), timeout=30).drawings
    assert picture.caption == "Not reviewed: the first violation" and f"turn {turn}:" in picture.svg


def test_a_dispute_is_drawn_as_the_report_draws_it(stub: Stub) -> None:
    lines = [line for line in (ROOT / "examples" / "disputes.jsonl").read_text(encoding="utf-8").splitlines() if line]
    drawn = 0
    for line in lines:
        case = jsonmsg.parse(line, pb.CheckDisputesRequest())
        reply = stub.DrawAnswer(pb.DrawAnswerRequest(dispute=case), timeout=30)
        verdict = judge_case(case)
        report = Report(drawn_cases=1)
        report.add(jsonmsg.to_json(verdict), line)
        page = report.html()
        for picture in reply.drawings:
            assert picture.caption in (drawings.CLAIMED, drawings.ANSWER)
            if verdict.outcome != pb.DISPUTE_OUTCOME_CONFIRMED:
                assert picture.svg.strip() in page
                drawn += 1
    assert drawn >= 2


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (pb.DrawAnswerRequest(), "question"),
        (pb.DrawAnswerRequest(solve_hand=pb.SolveHandRequest(cards=["AH", "ZZ"])), "solve_hand.cards[1]"),
        (pb.DrawAnswerRequest(check_close=pb.CheckCloseRequest(cards=["AH"])), "check_close.cards"),
        (pb.DrawAnswerRequest(review_deal=pb.ReviewDealRequest(), turns=list(range(1, 14))), "turns"),
        (pb.DrawAnswerRequest(replay_deal=pb.ReplayDealRequest(record=pb.DealRecord(dealer=3))), "replay_deal.record"),
    ],
    ids=["none", "card", "count", "turns", "record"],
)
def test_a_malformed_question_is_invalid_argument_naming_its_field(
    stub: Stub, request_: pb.DrawAnswerRequest, field: str
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        stub.DrawAnswer(request_, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_violation(caught.value).field.startswith(field), field_violation(caught.value)


def test_the_json_route_answers_the_same_pictures(stub: Stub) -> None:
    question = pb.DrawAnswerRequest(solve_hand=pb.SolveHandRequest(cards=HAND))
    text = jsonmsg.to_json(stub.DrawAnswer(question, timeout=30))
    assert json.loads(text)["drawings"][0]["svg"].startswith("<svg ")


def test_a_record_in_the_notation_is_drawn_as_its_message(stub: Stub) -> None:
    from referee.play.record import format_notation

    record = simulate(7, 3, SEARCH)
    text = format_notation(record)
    request = records.request_of(record)
    for as_text, as_message in (
        (pb.DrawAnswerRequest(review_deal=pb.ReviewDealRequest(notation=text)),
         pb.DrawAnswerRequest(review_deal=pb.ReviewDealRequest(record=request.record, rules=request.rules))),
        (pb.DrawAnswerRequest(replay_deal=pb.ReplayDealRequest(notation=text, stop_after_turn=4)),
         pb.DrawAnswerRequest(replay_deal=pb.ReplayDealRequest(record=request.record, rules=request.rules, stop_after_turn=4))),
    ):  # fmt: skip
        assert stub.DrawAnswer(as_text, timeout=60) == stub.DrawAnswer(as_message, timeout=60)
