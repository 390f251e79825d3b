"""Structure-aware mutations of the referee's requests: valid messages taken apart on the wire,
guided by their descriptors, and put back together wrong.

A seed request is parsed into its fields (number, wire type, value), the fields of a known message
type parsed in turn, so a mutation can reach any field at any depth and knows what it is: it drops
or duplicates a field, truncates a length-delimited one or lies about its length, overflows a
varint or spells it in too many bytes, changes a field's wire type, puts a boundary value or a
value of the same field from another seed in it, splices in a message of the same type, adds
unknown fields (numbers past the schema, the reserved range, the largest number), nests groups
and messages deep, and blows a repeated field up to its limit, just past it and far beyond
(``referee.game.limits``, ``referee.api.wire.MAX_FIELDS``, the message limit). The same seed and index
give the same bytes on every machine (``random.Random``).

``Fuzzer(seed).request(i)`` is the ``i``-th request: a method and its messages (the CheckDisputes
stream's cases; a unary method's one request, or a few times none or several, a framing no
client library sends). ``bench.soak`` sends them to a real server.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2

from bench.hands import end_of_deal, random_deals
from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api import records
from referee.api.convert import deal_to_proto
from referee.api.wire import COUNTED_OVER, MAX_FIELDS, read_varint
from referee.game.cards import deck
from referee.game.limits import LIMITS, MESSAGE_BYTES
from referee.game.rules import Engine, RuleSet
from referee.game.samples import sample_deals
from referee.play.simulate import simulate

SERVICE = "/remigio.referee.v1.RefereeService/"
HEALTH_CHECK = "/grpc.health.v1.Health/Check"
DISPUTES = SERVICE + "CheckDisputes"
# The methods a request goes to, and how often (out of their sum): the stream carries several
# cases a call, so it comes less often.
METHODS: dict[str, int] = {
    SERVICE + "SolveHand": 5,
    SERVICE + "CheckClose": 5,
    SERVICE + "ScoreDeal": 5,
    SERVICE + "ReplayDeal": 5,
    DISPUTES: 2,
    HEALTH_CHECK: 1,
}
REQUEST_TYPES: dict[str, type[Message]] = {
    SERVICE + "SolveHand": pb.SolveHandRequest,
    SERVICE + "CheckClose": pb.CheckCloseRequest,
    SERVICE + "ScoreDeal": pb.ScoreDealRequest,
    SERVICE + "ReplayDeal": pb.ReplayDealRequest,
    DISPUTES: pb.CheckDisputesRequest,
    HEALTH_CHECK: health_pb2.HealthCheckRequest,
}
CASES_PER_STREAM = 6
# The share of unary calls sent with no request message or several (as a client stream).
UNFRAMED = 0.02
# A request stays under this size (a few go a little past the message limit, to be refused whole).
MOST_BYTES = MESSAGE_BYTES + (64 << 10)

_VARINT, _FIXED64, _LENGTH, _START_GROUP, _END_GROUP, _FIXED32 = 0, 1, 2, 3, 4, 5
_TOP_NUMBER = (1 << 29) - 1  # the largest field number protobuf allows
_INT_BOUNDS = (
    0, 1, 2, 3, 9, 10, 11, 12, 21, 22, 255, 1000, 1001, (1 << 31) - 1, 1 << 31, (1 << 32) - 1, 1 << 32,
    (1 << 63) - 1, 1 << 63, (1 << 64) - 1, (1 << 64) - 1 - (1 << 31) + 1, (1 << 64) - 2,
)  # fmt: skip
_COUNT_LIMITS = {name: limit.most for limit in LIMITS for name in limit.fields if not name.endswith("[]")}
_LENGTH_LIMITS = {name[:-2] if name.endswith("[]") else name: limit.most for limit in LIMITS for name in limit.fields}
_CODES = [card.code() for card in deck(2)]


def varint(value: int) -> bytes:
    """``value`` (0 to 2**64 - 1; a negative one as its 64-bit two's complement) as a varint."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(number: int, wire: int) -> bytes:
    """The key of field ``number`` with wire type ``wire``."""
    return varint(number << 3 | wire)


@dataclass(slots=True)
class Node:
    """One field on the wire. ``value`` is the varint's value or the field's bytes; a known
    message-typed field (``message``) is parsed into ``children`` when a mutation goes into it
    (``open``); ``raw`` replaces the whole field when a mutation wrote bytes no field would (an
    overlong varint, a lying length)."""

    number: int
    wire: int
    value: int | bytes
    message: Descriptor | None = None
    children: list[Node] | None = None
    raw: bytes | None = None

    def open(self) -> list[Node]:
        """The fields of this message-typed field, parsed on first use."""
        if self.children is None:
            assert self.message is not None and isinstance(self.value, bytes)
            self.children = parse(self.value, self.message)
        return self.children

    def encode(self) -> bytes:
        """The field as bytes."""
        if self.raw is not None:
            return self.raw
        if self.wire == _VARINT:
            assert isinstance(self.value, int)
            return tag(self.number, _VARINT) + varint(self.value)
        payload = self.payload()
        if self.wire == _LENGTH:
            return tag(self.number, _LENGTH) + varint(len(payload)) + payload
        return tag(self.number, self.wire) + payload

    def payload(self) -> bytes:
        """The field's bytes after its key and length."""
        if self.children is not None:
            return encode(self.children)
        assert isinstance(self.value, bytes)
        return self.value

    def copy(self) -> Node:
        """A copy whose parsed fields (if any) are copies too."""
        children = None if self.children is None else [child.copy() for child in self.children]
        return Node(self.number, self.wire, self.value, self.message, children, self.raw)


def encode(nodes: Sequence[Node]) -> bytes:
    """The fields as a message's bytes."""
    return b"".join(node.encode() for node in nodes)


def parse(data: bytes, descriptor: Descriptor) -> list[Node]:
    """The fields of a valid message of type ``descriptor``, message-typed ones parsed too."""
    nodes: list[Node] = []
    pos = 0
    while pos < len(data):
        key, pos = read_varint(data, pos, len(data))
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = read_varint(data, pos, len(data))
            nodes.append(Node(number, wire, value))
        elif wire in (_FIXED32, _FIXED64):
            size = 4 if wire == _FIXED32 else 8
            nodes.append(Node(number, wire, data[pos : pos + size]))
            pos += size
        elif wire == _LENGTH:
            length, pos = read_varint(data, pos, len(data))
            payload = data[pos : pos + length]
            pos += length
            known = descriptor.fields_by_number.get(number)
            nodes.append(Node(number, wire, payload, None if known is None else known.message_type))
        else:
            raise ValueError(f"wire type {wire} in a seed")
    return nodes


@dataclass(slots=True)
class _Site:
    """A list of fields (a message's) and the message type they belong to."""

    nodes: list[Node]
    descriptor: Descriptor
    depth: int


def _pick_site(rng: random.Random, nodes: list[Node], descriptor: Descriptor) -> _Site:
    """A message of the request: the request itself or one inside it, reached by a random walk
    down its message fields (each level parsed only when the walk enters it)."""
    depth = 0
    while True:
        inner = [node for node in nodes if node.message is not None and node.raw is None and node.wire == _LENGTH]
        if not inner or rng.random() < 0.35:
            return _Site(nodes, descriptor, depth)
        node = rng.choice(inner)
        assert node.message is not None
        nodes, descriptor, depth = node.open(), node.message, depth + 1


@dataclass
class Pools:
    """What the seeds hold, to draw values from: every message's bytes by type, and the values
    seen in each field ("Message.field")."""

    messages: dict[str, list[bytes]] = field(default_factory=dict)
    values: dict[str, list[int | bytes]] = field(default_factory=dict)

    def learn(self, nodes: Sequence[Node], descriptor: Descriptor) -> None:
        """Add the fields of a seed (and of the messages in it)."""
        for node in nodes:
            known = descriptor.fields_by_number.get(node.number)
            if known is None:
                continue
            if node.message is not None:
                self.messages.setdefault(node.message.full_name, []).append(node.payload())
                self.learn(node.open(), node.message)
            else:
                found = self.values.setdefault(f"{descriptor.name}.{known.name}", [])
                if len(found) < 400:
                    found.append(node.value)


class Mutator:
    """Mutations of one message's fields, drawn from ``rng``."""

    def __init__(self, rng: random.Random, pools: Pools) -> None:
        self.rng = rng
        self.pools = pools
        self.operations: list[tuple[Callable[[_Site], str], int]] = [
            (self.drop, 10),
            (self.duplicate, 8),
            (self.truncate_field, 5),
            (self.lie_about_length, 3),
            (self.overflow_varint, 8),
            (self.wrong_wire_type, 4),
            (self.replace_value, 22),
            (self.add_known, 8),
            (self.splice, 6),
            (self.add_unknown, 8),
            (self.nest_deep, 3),
            (self.blow_up_repeated, 8),
            (self.reorder, 3),
        ]

    def mutate(self, nodes: list[Node], descriptor: Descriptor, count: int) -> list[str]:
        """Apply ``count`` mutations to ``nodes`` (a message of type ``descriptor``, or one inside
        it) in place; the names of those applied."""
        operations, weights = zip(*self.operations, strict=True)
        done: list[str] = []
        for _ in range(count):
            site = _pick_site(self.rng, nodes, descriptor)
            done.append(self.rng.choices(operations, weights)[0](site))
        return done

    def _pick(self, site: _Site, accept: Callable[[Node], bool] = lambda node: True) -> int | None:
        found = [i for i, node in enumerate(site.nodes) if accept(node)]
        return self.rng.choice(found) if found else None

    def _known(self, site: _Site) -> Callable[[Node], bool]:
        return lambda node: node.number in site.descriptor.fields_by_number and node.raw is None

    def _insert(self, site: _Site, *nodes: Node) -> None:
        at = self.rng.randrange(len(site.nodes) + 1)
        site.nodes[at:at] = nodes

    # Mutations --------------------------------------------------------------------------------

    def drop(self, site: _Site) -> str:
        """Remove a field (a required one, a repeated element, a whole message)."""
        i = self._pick(site)
        if i is not None:
            del site.nodes[i]
        return "drop"

    def duplicate(self, site: _Site) -> str:
        """Send a field again: a second value of a singular field, an extra element."""
        i = self._pick(site)
        if i is not None:
            node = site.nodes[i]
            self._insert(site, *(node.copy() for _ in range(self.rng.choice((1, 1, 2, 5)))))
        return "duplicate"

    def truncate_field(self, site: _Site) -> str:
        """Cut a length-delimited field's bytes short (its length says the shorter size)."""
        i = self._pick(site, lambda node: node.wire == _LENGTH and node.raw is None)
        if i is not None:
            node = site.nodes[i]
            payload = node.payload()
            cut = self.rng.randrange(len(payload)) if payload else 0
            site.nodes[i] = Node(node.number, _LENGTH, payload[:cut])
        return "truncate field"

    def lie_about_length(self, site: _Site) -> str:
        """A length-delimited field whose length is not its size: past the end, or short of it."""
        i = self._pick(site, lambda node: node.wire == _LENGTH and node.raw is None)
        if i is not None:
            node = site.nodes[i]
            payload = node.payload()
            length = self.rng.choice(
                (len(payload) + 1, len(payload) + 1000, max(0, len(payload) - 1), (1 << 31) - 1, (1 << 64) - 1)
            )
            node.raw = tag(node.number, _LENGTH) + varint(length) + payload
        return "lie about length"

    def overflow_varint(self, site: _Site) -> str:
        """A varint past its field's range, spelled in more bytes than needed, or never ending."""
        i = self._pick(site, lambda node: node.wire == _VARINT and node.raw is None)
        if i is None:
            return "overflow varint"
        node = site.nodes[i]
        how = self.rng.randrange(4)
        if how <= 1:
            node.value = self.rng.choice(_INT_BOUNDS[13:])
        elif how == 2:  # the same value in up to 10 bytes (protobuf accepts it)
            assert isinstance(node.value, int)
            spelled = bytearray(varint(node.value))
            for _ in range(self.rng.randint(0, 10 - len(spelled))):
                spelled[-1] |= 0x80
                spelled.append(0)
            node.raw = tag(node.number, _VARINT) + bytes(spelled)
        else:  # 11 bytes or more: no varint is that long
            node.raw = tag(node.number, _VARINT) + b"\xff" * self.rng.randint(10, 40) + b"\x01"
        return "overflow varint"

    def wrong_wire_type(self, site: _Site) -> str:
        """A known field sent with another wire type (a string as a varint, a message as fixed32)."""
        i = self._pick(site, self._known(site))
        if i is not None:
            node = site.nodes[i]
            wire = self.rng.choice([w for w in (_VARINT, _FIXED64, _LENGTH, _FIXED32) if w != node.wire])
            site.nodes[i] = self._unknown_value(node.number, wire)
        return "wrong wire type"

    def replace_value(self, site: _Site) -> str:
        """A known field's value replaced: a value of the same field from another seed, a boundary
        value, an unknown enum number, a bad string (invalid UTF-8, too long, a card that is not)."""
        i = self._pick(site, self._known(site))
        if i is not None:
            known = site.descriptor.fields_by_number[site.nodes[i].number]
            site.nodes[i] = (
                self._message(known) if known.message_type is not None else self._value(site.descriptor, known)
            )
        return "replace value"

    def add_known(self, site: _Site) -> str:
        """A known field added where a seed had none (a oneof's second member, an absent option)."""
        if site.descriptor.fields:
            known = self.rng.choice(site.descriptor.fields)
            self._insert(
                site, self._message(known) if known.message_type is not None else self._value(site.descriptor, known)
            )
        return "add known"

    def splice(self, site: _Site) -> str:
        """A message field replaced by a message of the same type from another seed."""
        i = self._pick(site, lambda node: node.message is not None and node.raw is None)
        if i is not None:
            site.nodes[i] = self._message(site.descriptor.fields_by_number[site.nodes[i].number], from_seeds=True)
        return "splice"

    def add_unknown(self, site: _Site) -> str:
        """Fields the schema does not know: past its numbers, in the reserved range, the largest
        number, number 0, wire types 6 and 7, a group, an unmatched end of group."""
        top = max((f.number for f in site.descriptor.fields), default=0)
        number = self.rng.choice(
            (top + 1, top + 2, 1000, 19_000, 19_999, _TOP_NUMBER, self.rng.randint(1, _TOP_NUMBER))
        )
        how = self.rng.randrange(10)
        if how < 7:
            node = self._unknown_value(number, self.rng.choice((_VARINT, _FIXED64, _LENGTH, _FIXED32)))
        elif how == 7:
            inner = self._unknown_value(self.rng.randint(1, 100), _VARINT).encode()
            node = Node(number, _START_GROUP, b"", raw=tag(number, _START_GROUP) + inner + tag(number, _END_GROUP))
        elif how == 8:
            key = tag(self.rng.choice((0, number)), self.rng.choice((6, 7, _END_GROUP)))
            node = Node(0, _VARINT, 0, raw=key + b"\x01")
        else:
            node = Node(number, _VARINT, 0, raw=tag(number, self.rng.choice((_START_GROUP, _END_GROUP))))
        self._insert(site, node)
        return "add unknown"

    def nest_deep(self, site: _Site) -> str:
        """Deep nesting: groups inside groups, or length-delimited fields inside each other, a
        known message field's number at every level or an unknown one."""
        depth = self.rng.choice((20, 64, 99, 100, 101, 200, 1000, 5000))
        messages = [f.number for f in site.descriptor.fields if f.message_type is not None]
        number = self.rng.choice(messages) if messages and self.rng.random() < 0.5 else self.rng.randint(20, 5000)
        if self.rng.random() < 0.5:
            raw = tag(number, _START_GROUP) * depth + tag(number, _END_GROUP) * depth
        else:
            raw = b""
            for _ in range(depth):
                raw = tag(number, _LENGTH) + varint(len(raw)) + raw
        self._insert(site, Node(number, _LENGTH, b"", raw=raw))
        return "nest deep"

    def blow_up_repeated(self, site: _Site) -> str:
        """A repeated field blown up: to its limit, one past it, far past it, past the most fields
        a request may hold, up to the message limit."""
        repeated = [known for known in site.descriptor.fields if known.is_repeated]
        if not repeated:
            return "blow up repeated"
        known = self.rng.choice(repeated)
        present = [node for node in site.nodes if node.number == known.number and node.raw is None]
        if present and self.rng.random() < 0.7:
            element = self.rng.choice(present).copy()
        elif known.message_type is not None:
            element = self._message(known)
        else:
            element = self._value(site.descriptor, known)
        most = _COUNT_LIMITS.get(f"{site.descriptor.name}.{known.name}", 16)
        count = self.rng.choice((most, most + 1, most + 1, most + 2, 2 * most, most + COUNTED_OVER + 1))
        if self.rng.random() < 0.1:  # past the walk's field limit, up to the message limit
            count = self.rng.choice((MAX_FIELDS + 1, 100_000, 1 << 20))
        size = len(element.encode()) or 1
        more = max(0, min(count, MOST_BYTES // size) - len(present))
        if more > 64:  # as bytes: a list of a million fields would cost the fuzzer seconds
            self._insert(site, Node(known.number, _LENGTH, b"", raw=element.encode() * more))
        else:
            self._insert(site, *(element.copy() for _ in range(more)))
        return "blow up repeated"

    def reorder(self, site: _Site) -> str:
        """A message's fields in another order (repeated elements reordered, a oneof's last wins)."""
        self.rng.shuffle(site.nodes)
        return "reorder"

    # Values -----------------------------------------------------------------------------------

    def _unknown_value(self, number: int, wire: int) -> Node:
        if wire == _VARINT:
            return Node(number, wire, self.rng.choice(_INT_BOUNDS))
        if wire in (_FIXED32, _FIXED64):
            return Node(number, wire, self.rng.randbytes(4 if wire == _FIXED32 else 8))
        size = self.rng.choice((0, 1, 7, 100, 4096))
        kind = self.rng.randrange(3)
        if kind == 0:
            return Node(number, wire, self.rng.randbytes(size))
        if kind == 1 and self.pools.messages:
            return Node(number, wire, self.rng.choice(self.rng.choice(list(self.pools.messages.values()))))
        return Node(number, wire, (b"AH " * size)[:size])

    def _message(self, known: FieldDescriptor, from_seeds: bool = False) -> Node:
        message = known.message_type
        pool = self.pools.messages.get(message.full_name)
        data = self.rng.choice(pool) if pool and (from_seeds or self.rng.random() < 0.85) else b""
        return Node(known.number, _LENGTH, data, message)

    def _value(self, descriptor: Descriptor, known: FieldDescriptor) -> Node:
        seen = self.pools.values.get(f"{descriptor.name}.{known.name}")
        if seen and self.rng.random() < 0.4:
            value = self.rng.choice(seen)
            return Node(known.number, _VARINT if isinstance(value, int) else _LENGTH, value)
        if known.type == FieldDescriptor.TYPE_STRING:
            return Node(known.number, _LENGTH, self._string(f"{descriptor.name}.{known.name}"))
        if known.type == FieldDescriptor.TYPE_ENUM:
            top = max(v.number for v in known.enum_type.values)
            return Node(
                known.number, _VARINT, self.rng.choice((0, top, top + 1, top + 100, (1 << 31) - 1, (1 << 64) - 1))
            )
        if known.type == FieldDescriptor.TYPE_BOOL:
            return Node(known.number, _VARINT, self.rng.choice((0, 1, 2, (1 << 64) - 1)))
        if known.type in (FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_SFIXED32, FieldDescriptor.TYPE_FLOAT):
            return Node(known.number, _FIXED32, self.rng.randbytes(4))
        if known.type in (FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64, FieldDescriptor.TYPE_DOUBLE):
            return Node(known.number, _FIXED64, self.rng.randbytes(8))
        if known.type == FieldDescriptor.TYPE_BYTES:
            return Node(known.number, _LENGTH, self.rng.randbytes(self.rng.choice((0, 1, 64))))
        value = self.rng.choice(_INT_BOUNDS) if self.rng.random() < 0.6 else self.rng.randint(-3, 25)
        return Node(known.number, _VARINT, value)

    def _string(self, name: str) -> bytes:
        most = _LENGTH_LIMITS.get(name, 64)
        kind = self.rng.randrange(12)
        if kind <= 3:
            code = self.rng.choice(_CODES)
            return self.rng.choice((code, code.lower(), f" {code} ", code + "\ufe0f", code.replace("10", "1"))).encode()
        choices: tuple[bytes, ...] = (
            b"",
            b" ",
            b"\x00",
            b"\xff\xfe",  # not UTF-8
            b"\xc3",  # a UTF-8 sequence cut short
            b"\xed\xa0\x80",  # a surrogate
            "🂡".encode() * self.rng.choice((1, most, most + 1)),
            b"x" * most,
            b"x" * (most + 1),
            b"Z" * self.rng.choice((1 << 10, 1 << 16)),
            b"JK",
            b"1H",
            "10♠\ufe0f\ufe0f".encode(),
            b"%s%n{}${}",
            "ñandú".encode(),
        )
        return self.rng.choice(choices)


# Seeds -----------------------------------------------------------------------------------------


def _rules(rng: random.Random) -> pb.RuleOptions:
    """Rule options of a seed: most leave the engine to the server, some pick one."""
    options = pb.RuleOptions()
    if rng.random() < 0.3:
        options.engine = rng.choice((pb.ENGINE_SEARCH, pb.ENGINE_CPSAT, pb.ENGINE_AUDIT))
    if rng.random() < 0.3:
        options.decks = rng.choice((1, 2, 3))
    if rng.random() < 0.3:
        options.joker_limit = rng.choice((pb.JOKER_LIMIT_UNLIMITED, pb.JOKER_LIMIT_ONE_PER_GROUP))
    if rng.random() < 0.2:
        options.wrap_runs = True
    if rng.random() < 0.2:
        options.multipliers.add(kind=pb.CLOSE_KIND_COLOR, multiplier=3)
    if rng.random() < 0.2:
        options.scoring.mode = rng.choice((pb.SCORING_MODE_POOL, pb.SCORING_MODE_ELIMINATION))
        options.scoring.target = 101
    return options


def seed_requests(seed: int) -> dict[str, list[bytes]]:
    """Valid requests of every method (and valid dispute cases), from ``seed``."""
    rng = random.Random(seed)
    hands = end_of_deal(seed, 24) + random_deals(seed + 1, 12, size=11)
    solve = [pb.SolveHandRequest(cards=[c.code() for c in hand], rules=_rules(rng)) for hand in hands]
    deals = sample_deals(seed, 8, players=4) + sample_deals(seed + 1, 4, players=2) + sample_deals(seed + 2, 2, 6)
    score = []
    close = []
    for deal in deals:
        message = deal_to_proto(deal)
        claims = pb.DealClaims(multiplier=rng.choice((1, 2)), close_kind=pb.CLOSE_KIND_LINKED)
        for i, player in enumerate(message.players):
            if rng.random() < 0.5:
                claims.players.add(
                    player=i, points=rng.randint(0, 60), groups=[pb.ClaimedGroup(cards=player.cards[:3])]
                )
        score.append(pb.ScoreDealRequest(deal=message, rules=_rules(rng), claims=claims))
        shown = message.players[message.closer].cards
        close.append(pb.CheckCloseRequest(cards=shown, discard=message.discard, claimed_kind=pb.CLOSE_KIND_LINKED))
        close.append(pb.CheckCloseRequest(cards=[*shown, message.discard], rules=_rules(rng)))
    fast = RuleSet(engine=Engine.SEARCH)
    replay = []
    for n in range(10):
        record = simulate(seed + n, 2 + n % 4, fast, seeded=n % 2 == 0, max_turns=60)
        replay.append(records.request_of(record, pb.DealClaims(multiplier=2) if n % 3 == 0 else None))
    cases = [
        pb.CheckDisputesRequest(id=f"h{i}", hand=pb.HandDispute(cards=r.cards, claimed_points=33))
        for i, r in enumerate(solve[:8])
    ]
    cases += [pb.CheckDisputesRequest(id=f"c{i}", close=r) for i, r in enumerate(close[:6])]
    cases += [pb.CheckDisputesRequest(id=f"d{i}", deal=r) for i, r in enumerate(score[:6])]
    cases += [pb.CheckDisputesRequest(id=f"r{i}", record=r) for i, r in enumerate(replay[:6])]
    health = [
        health_pb2.HealthCheckRequest(),
        health_pb2.HealthCheckRequest(service="remigio.referee.v1.RefereeService"),
    ]
    found: dict[str, Sequence[Message]] = {
        SERVICE + "SolveHand": solve,
        SERVICE + "CheckClose": close,
        SERVICE + "ScoreDeal": score,
        SERVICE + "ReplayDeal": replay,
        DISPUTES: cases,
        HEALTH_CHECK: health,
    }
    return {method: [m.SerializeToString(deterministic=True) for m in messages] for method, messages in found.items()}


class Fuzzer:
    """The requests of a soak: ``request(i)`` is the same for the same seed and ``i``."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.seeds = seed_requests(seed)
        self.pools = Pools()
        for method, datas in self.seeds.items():
            descriptor = REQUEST_TYPES[method].DESCRIPTOR
            for data in datas:
                self.pools.learn(parse(data, descriptor), descriptor)
        self._methods = list(METHODS)
        self._weights = list(METHODS.values())

    def request(self, index: int) -> tuple[str, list[bytes]]:
        """The ``index``-th request: its method's path and its messages: the stream's cases, or a
        unary method's one request (a few times none, or two or more: a broken framing)."""
        rng = random.Random(self.seed * 1_000_003 + index)
        method = rng.choices(self._methods, self._weights)[0]
        if method == DISPUTES:
            return method, [self._one(rng, method) for _ in range(rng.randint(1, CASES_PER_STREAM))]
        if rng.random() < UNFRAMED:
            return method, [self._one(rng, method) for _ in range(rng.choice((0, 2, 3)))]
        return method, [self._one(rng, method)]

    def _one(self, rng: random.Random, method: str) -> bytes:
        data = rng.choice(self.seeds[method])
        if rng.random() < 0.08:
            return data  # some valid requests: the answering path under the same load
        descriptor = REQUEST_TYPES[method].DESCRIPTOR
        nodes = parse(data, descriptor)
        count = 1
        while count < 6 and rng.random() < 0.45:
            count += 1
        Mutator(rng, self.pools).mutate(nodes, descriptor, count)
        out = encode(nodes)
        roll = rng.random()
        if roll < 0.02 and out:  # the message cut anywhere, as a broken client may send it
            out = out[: rng.randrange(len(out))]
        elif roll < 0.04 and out:  # a few bytes flipped
            flipped = bytearray(out)
            for _ in range(rng.randint(1, 3)):
                flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
            out = bytes(flipped)
        return out[:MOST_BYTES]


__all__ = [
    "DISPUTES",
    "HEALTH_CHECK",
    "METHODS",
    "REQUEST_TYPES",
    "Fuzzer",
    "Mutator",
    "Node",
    "encode",
    "parse",
    "seed_requests",
]
