"""Whatever a client puts on the wire, the referee answers OK or INVALID_ARGUMENT and keeps serving.

Against the session's real server on 127.0.0.1: requests that do not decode at all, and property
tests (hypothesis, derandomized) with bytes drawn at random; with messages whose every field, at
any depth, takes values drawn from card codes, near-misses, text, extreme integers and enum
numbers the contract does not define; and with valid end-of-deal states, closes and deal records,
a few of their fields changed, so that the draws also reach the scoring, the replay and the claims.
"""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from servers import field_violation

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api.convert import deal_to_proto
from referee.api.records import request_of
from referee.api.wire import DECODED_FIRST_BYTES, Unreadable, check_counts, counts_within, read_varint
from referee.game.cards import deck
from referee.game.errors import LimitError
from referee.game.rules import Engine, RuleSet
from referee.game.samples import sample_deals
from referee.play.simulate import simulate

SERVICE = "/remigio.referee.v1.RefereeService/"
UNARY = {
    "SolveHand": pb.SolveHandRequest,
    "CheckClose": pb.CheckCloseRequest,
    "ScoreDeal": pb.ScoreDealRequest,
    "ReplayDeal": pb.ReplayDealRequest,
    "ReviewDeal": pb.ReviewDealRequest,
    "DrawAnswer": pb.DrawAnswerRequest,
}
FUZZ = settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

CARDS = sorted({card.code() for card in deck(1)})
CODES = CARDS + ["", "1H", "11S", "ah", "A\u2665", "10", "KK", "J K", "AH "]
INTS = st.one_of(
    st.integers(0, 3), st.integers(0, 3), st.integers(-3, 14), st.sampled_from([-(2**31), 2**31 - 1, 1000, -1000])
)


def _raw(channel: grpc.Channel, method: str) -> grpc.UnaryUnaryMultiCallable:
    return channel.unary_unary(SERVICE + method, request_serializer=None, response_deserializer=None)


def _answer(channel: grpc.Channel, method: str, payload: bytes) -> None:
    """Call; the reply must be OK (and decode) or INVALID_ARGUMENT with a BadRequest."""
    try:
        reply = _raw(channel, method)(payload, timeout=30)
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (error.code(), error.details(), payload)
        assert field_violation(error).description
        assert "Traceback" not in error.details()
    else:
        getattr(pb, method + "Response").FromString(reply)


@pytest.mark.parametrize("method", UNARY)
@pytest.mark.parametrize(
    "payload", [b"\xff", b"\x0a\x05AH", b"\x80\x80\x80"], ids=["bad tag", "cut string", "cut varint"]
)
def test_a_request_that_does_not_decode_is_invalid_argument(channel: grpc.Channel, method: str, payload: bytes) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        _raw(channel, method)(payload, timeout=10)
    violation = field_violation(caught.value)
    assert violation.field == ""  # the whole request
    assert UNARY[method].DESCRIPTOR.full_name in violation.description
    assert f"'{len(payload)} bytes'" in violation.description
    # And the server goes on serving.
    assert pb.SolveHandResponse.FromString(
        _raw(channel, "SolveHand")(pb.SolveHandRequest(cards=["AH"]).SerializeToString())
    )


def test_a_stream_case_that_does_not_decode_gets_a_malformed_verdict_alone(channel: grpc.Channel) -> None:
    def case(case_id: str) -> bytes:
        return pb.CheckDisputesRequest(id=case_id, hand=pb.HandDispute(cards="AH 2H 3H 9C".split())).SerializeToString()

    call = channel.stream_stream(
        SERVICE + "CheckDisputes", request_serializer=None, response_deserializer=pb.CheckDisputesResponse.FromString
    )
    verdicts = list(call(iter([case("a"), b"\xff\xff", case("c")]), timeout=30))
    assert [v.id for v in verdicts] == ["a", "", "c"]
    assert [v.outcome == pb.DISPUTE_OUTCOME_MALFORMED for v in verdicts] == [False, True, False]
    assert verdicts[1].error.value == "2 bytes"
    assert "CheckDisputesRequest" in verdicts[1].error.message


@pytest.mark.parametrize("method", UNARY)
@FUZZ
@given(payload=st.binary(max_size=80))
def test_any_bytes_get_ok_or_invalid_argument(channel: grpc.Channel, method: str, payload: bytes) -> None:
    _answer(channel, method, payload)


def _field_values(field: FieldDescriptor, depth: int) -> st.SearchStrategy:
    # Mostly values that pass, so that the draws also reach past the first check.
    if field.type == FieldDescriptor.TYPE_STRING:
        return st.one_of(st.sampled_from(CARDS), st.sampled_from(CARDS), st.sampled_from(CODES), st.text(max_size=8))
    if field.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if field.type == FieldDescriptor.TYPE_ENUM:
        defined = st.sampled_from([value.number for value in field.enum_type.values])
        return st.one_of(defined, defined, defined, st.integers(-2, 12))  # open enums: undefined numbers go through
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return _messages(field.message_type, depth + 1)
    if field.type == FieldDescriptor.TYPE_UINT64:
        return st.one_of(st.integers(0, 3), st.sampled_from([2**32, 2**64 - 1]))
    return INTS


def _messages(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Message]:
    """Messages of ``descriptor`` with any of their fields set, to any values, four levels deep."""
    make = message_factory.GetMessageClass(descriptor)
    fields = {}
    for field in descriptor.fields:
        if field.type == FieldDescriptor.TYPE_MESSAGE and depth >= 3:
            continue
        values = _field_values(field, depth)
        repeated = field.is_repeated
        fields[field.name] = (
            st.lists(values, max_size=12 if field.type == FieldDescriptor.TYPE_STRING else 5) if repeated else values
        )

    def build(drawn: dict) -> Message:
        for oneof in descriptor.oneofs:  # one member of a oneof at most
            for extra in [f.name for f in oneof.fields if f.name in drawn][1:]:
                del drawn[extra]
        return make(**drawn)

    return st.fixed_dictionaries({}, optional=fields).map(build)


@pytest.mark.parametrize("method", UNARY)
@FUZZ
@given(data=st.data())
def test_any_field_values_get_ok_or_invalid_argument(channel: grpc.Channel, method: str, data: st.DataObject) -> None:
    request = data.draw(_messages(UNARY[method].DESCRIPTOR))
    _answer(channel, method, request.SerializeToString())


# Near-valid requests: valid end-of-deal states (the service benchmark's), a few fields changed.

BASES = [deal_to_proto(deal) for deal in sample_deals(7, 12)]
ANY_CODE = st.one_of(st.sampled_from(CARDS + ["JK"]), st.sampled_from(CODES))


@st.composite
def _changed_deals(draw: st.DrawFn) -> pb.ScoreDealRequest:
    request = pb.ScoreDealRequest(deal=draw(st.sampled_from(BASES)))
    deal = request.deal
    for _ in range(draw(st.integers(1, 3))):
        change = draw(
            st.sampled_from(
                ["card", "drop", "add", "closer", "discard", "score", "piles", "eliminated", "rules", "claims"]
            )
        )
        player = deal.players[draw(st.integers(0, len(deal.players) - 1))]
        if change == "card" and player.cards:
            player.cards[draw(st.integers(0, len(player.cards) - 1))] = draw(ANY_CODE)
        elif change == "drop" and player.cards:
            del player.cards[draw(st.integers(0, len(player.cards) - 1))]
        elif change == "add":
            player.cards.append(draw(ANY_CODE))
        elif change == "closer":
            deal.closer = draw(st.integers(-1, 5))
        elif change == "discard":
            deal.discard = draw(ANY_CODE)
        elif change == "score":
            player.score = draw(INTS)
        elif change == "piles":
            deal.ClearField(draw(st.sampled_from(["discard_pile", "stock"])))
        elif change == "eliminated":
            deal.eliminated.append(draw(st.sampled_from(["p0", "p1", "p2", "p3", "p9", ""])))
        elif change == "rules":
            request.rules.CopyFrom(draw(_messages(pb.RuleOptions.DESCRIPTOR)))
        else:
            request.claims.CopyFrom(draw(_messages(pb.DealClaims.DESCRIPTOR)))
    return request


@FUZZ
@given(request=_changed_deals())
def test_changed_deals_get_ok_or_invalid_argument(channel: grpc.Channel, request: pb.ScoreDealRequest) -> None:
    _answer(channel, "ScoreDeal", request.SerializeToString())


@FUZZ
@given(
    base=st.sampled_from(BASES),
    eleven=st.booleans(),
    swaps=st.lists(st.tuples(st.integers(0, 10), ANY_CODE), max_size=2),
    kind=st.none() | st.integers(-1, 8),
    multiplier=st.none() | INTS,
)
def test_changed_closes_get_ok_or_invalid_argument(
    channel: grpc.Channel, base: pb.Deal, eleven: bool, swaps: list, kind: int | None, multiplier: int | None
) -> None:
    cards = list(base.players[base.closer].cards) + ([base.discard] if eleven else [])
    for at, code in swaps:
        cards[at % len(cards)] = code
    request = pb.CheckCloseRequest(cards=cards, discard="" if eleven else base.discard)
    if kind is not None:
        request.claimed_kind = kind
    if multiplier is not None:
        request.claimed_multiplier = multiplier
    _answer(channel, "CheckClose", request.SerializeToString())


# Near-valid deal records: simulated records (seeded and explicit decks), a few fields changed.

RECORDS = [
    request_of(simulate(seed, 2 + seed % 4, RuleSet(engine=Engine.SEARCH), seeded=seed % 2 == 0, max_turns=40))
    for seed in range(8)
]


@st.composite
def _changed_records(draw: st.DrawFn) -> pb.ReplayDealRequest:
    request = pb.ReplayDealRequest()
    request.CopyFrom(draw(st.sampled_from(RECORDS)))
    record = request.record
    for _ in range(draw(st.integers(1, 3))):
        change = draw(
            st.sampled_from(
                ["discard", "drawn", "draw", "seat", "close", "restock", "drop", "dealer", "order", "rules"]
            )
        )
        turn = record.turns[draw(st.integers(0, len(record.turns) - 1))] if record.turns else pb.Turn()
        if change == "discard":
            turn.discard = draw(ANY_CODE)
        elif change == "drawn":
            turn.drawn = draw(ANY_CODE)
        elif change == "draw":
            turn.draw = draw(st.integers(-1, 3))
        elif change == "seat":
            turn.seat = draw(st.integers(-1, 6))
        elif change == "close":
            turn.close = not turn.close
        elif change == "restock":
            turn.restock.cards.extend(draw(st.lists(ANY_CODE, max_size=4)))
        elif change == "drop" and record.turns:
            del record.turns[draw(st.integers(0, len(record.turns) - 1))]
        elif change == "dealer":
            record.dealer = draw(st.integers(-1, 6))
        elif change == "order":
            if record.HasField("shuffle"):
                record.shuffle.server_seed_hash = draw(st.sampled_from(["", "ab" * 32, "zz"]))
                record.shuffle.nonce = draw(st.integers(0, 2**64 - 1))
            else:
                record.deck.cards[draw(st.integers(0, len(record.deck.cards) - 1))] = draw(ANY_CODE)
        else:
            request.rules.CopyFrom(draw(_messages(pb.RuleOptions.DESCRIPTOR)))
    return request


@FUZZ
@given(request=_changed_records())
def test_changed_records_get_ok_or_invalid_argument(channel: grpc.Channel, request: pb.ReplayDealRequest) -> None:
    _answer(channel, "ReplayDeal", request.SerializeToString())


def test_read_varint_reads_one_and_refuses_what_runs_past_its_end_or_over_64_bits() -> None:
    assert read_varint(b"\x96\x01\x05", 0, 3) == (150, 2)
    assert read_varint(b"\x96\x01\x05", 2, 3) == (5, 3)
    with pytest.raises(Unreadable):
        read_varint(b"\x96\x01", 0, 1)  # its last byte lies past the end
    with pytest.raises(Unreadable):
        read_varint(b"\xff" * 10 + b"\x01", 0, 11)  # 11 bytes: over 64 bits


# Decoded first: a small request whose decoded counts are within their limits skips the walk.


def _walk_finds(data: bytes, descriptor: Descriptor) -> str | None:
    """What ``check_counts`` raises over ``data`` (its text), or None."""
    try:
        check_counts(data, descriptor)
    except LimitError as error:
        return str(error)
    return None


@pytest.mark.parametrize("method", UNARY)
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_counts_within_a_decoded_request_means_the_walk_finds_nothing(method: str, data: st.DataObject) -> None:
    # Messages with up to 12 elements in each repeated field (over several limits: 7 multipliers,
    # 10 or 11 cards, 11 groups), sent one after another (a message field sent twice is merged,
    # a repeated one appended), now and then cut or with a byte changed.
    descriptor = UNARY[method].DESCRIPTOR
    parts = data.draw(st.lists(_messages(descriptor), min_size=1, max_size=3))
    payload = b"".join(part.SerializeToString() for part in parts)
    if payload and data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(payload) - 1))
        payload = payload[:at] + bytes([data.draw(st.integers(0, 255))]) + payload[at + 1 :]
    payload = payload[: DECODED_FIRST_BYTES - 1]
    try:
        decoded = UNARY[method].FromString(payload)
    except DecodeError:
        return
    found = _walk_finds(payload, descriptor)
    if counts_within(decoded):
        assert found is None, (found, payload)
    # And the converse, on a message sent once whose type holds no oneof of messages (a record's
    # deck or shuffle, a drawing's question: such requests are always walked): a count over its
    # limit is one the walk finds.
    if (
        method in ("SolveHand", "CheckClose", "ScoreDeal")
        and len(parts) == 1
        and payload == parts[0].SerializeToString()
    ):
        assert counts_within(decoded) == (found is None), (found, payload)


def test_a_message_field_sent_twice_is_left_to_the_walk() -> None:
    # Two halves of the rules, each within the limit of 7 multipliers, merged into 10 when decoded:
    # the walk counts each half and finds nothing, as it did before requests were decoded first.
    half = pb.SolveHandRequest(
        cards=["AH"], rules=pb.RuleOptions(multipliers=[pb.Multiplier()] * 5)
    ).SerializeToString()
    payload = half + half
    assert not counts_within(pb.SolveHandRequest.FromString(payload))
    assert _walk_finds(payload, pb.SolveHandRequest.DESCRIPTOR) is None
    over = pb.SolveHandRequest(cards=["AH"] * 12).SerializeToString()
    assert not counts_within(pb.SolveHandRequest.FromString(over))
    assert _walk_finds(over, pb.SolveHandRequest.DESCRIPTOR) is not None
