"""The rule set: every option of the rule book with its default (RULES §1-§5)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from referee.game.errors import InvalidOptionError, rooted_at
from referee.game.kinds import Kind


class JokerLimit(Kind):
    """How many jokers a group may hold (RULES §2)."""

    UNLIMITED = "UNLIMITED"
    NO_MORE_THAN_NATURALS = "NO_MORE_THAN_NATURALS"
    ONE_PER_GROUP = "ONE_PER_GROUP"

    def allows(self, naturals: int, jokers: int) -> bool:
        """True when a group of ``naturals`` natural cards may hold ``jokers`` jokers."""
        if self is JokerLimit.NO_MORE_THAN_NATURALS:
            return jokers <= naturals
        if self is JokerLimit.ONE_PER_GROUP:
            return jokers <= 1
        return True


class JokerDiscard(Kind):
    """What a joker laid face down as the close discard does (RULES §4)."""

    CLEAN = "CLEAN"  # nothing: "no joker" is about the 10 shown cards
    NOT_CLEAN = "NOT_CLEAN"  # the close counts as one with jokers
    FORBIDDEN = "FORBIDDEN"  # a joker may not be the discard


class DiscardTaken(Kind):
    """Whether a card taken from the discard pile may be thrown back face up on the same turn (RULES §9.2)."""

    ALLOWED = "ALLOWED"
    FORBIDDEN = "FORBIDDEN"  # laying it face down to close is allowed either way


class CloseKind(Kind):
    """The kinds of close, from the highest default multiplier down (RULES §4)."""

    REMIGIO = "REMIGIO"
    STRAIGHT_FLUSH_CLEAN = "STRAIGHT_FLUSH_CLEAN"
    STRAIGHT_FLUSH = "STRAIGHT_FLUSH"
    COLOR_CLEAN = "COLOR_CLEAN"
    COLOR = "COLOR"
    LINKED_CLEAN = "LINKED_CLEAN"
    LINKED = "LINKED"


DEFAULT_MULTIPLIERS: Mapping[CloseKind, int] = MappingProxyType(
    {
        CloseKind.REMIGIO: 10,
        CloseKind.STRAIGHT_FLUSH_CLEAN: 6,
        CloseKind.STRAIGHT_FLUSH: 5,
        CloseKind.COLOR_CLEAN: 4,
        CloseKind.COLOR: 3,
        CloseKind.LINKED_CLEAN: 2,
        CloseKind.LINKED: 1,
    }
)


class ScoringMode(Kind):
    """How a deal is scored and a match progresses (RULES §5)."""

    HEAD_TO_HEAD = "HEAD_TO_HEAD"
    POOL = "POOL"
    ELIMINATION = "ELIMINATION"


@dataclass(frozen=True, slots=True)
class ScoringRules:
    """A scoring mode with its parameters; ``None`` means the mode's default."""

    mode: ScoringMode | None = None
    start_score: int | None = None
    target: int | None = None
    close_bonus: int | None = None
    limit: int | None = None

    def resolved(self, players: int) -> ScoringRules:
        """The same rules with the mode chosen (2 players: HEAD_TO_HEAD, else POOL) and every default filled in."""
        mode = self.mode or (ScoringMode.HEAD_TO_HEAD if players == 2 else ScoringMode.POOL)
        defaults = _SCORING_DEFAULTS[mode]
        return ScoringRules(
            mode=mode,
            start_score=defaults["start_score"] if self.start_score is None else self.start_score,
            target=defaults["target"] if self.target is None else self.target,
            close_bonus=defaults["close_bonus"] if self.close_bonus is None else self.close_bonus,
            limit=defaults["limit"] if self.limit is None else self.limit,
        )


_SCORING_DEFAULTS: dict[ScoringMode, dict[str, int]] = {
    ScoringMode.HEAD_TO_HEAD: {"start_score": 0, "target": 150, "close_bonus": 0, "limit": 0},
    ScoringMode.POOL: {"start_score": 200, "target": 500, "close_bonus": 40, "limit": 0},
    ScoringMode.ELIMINATION: {"start_score": 0, "target": 0, "close_bonus": 0, "limit": 100},
}


class Engine(enum.StrEnum):
    """The linking engines; every engine gives the same canonical answer (``referee.game.linking``)."""

    CPSAT = "cpsat"
    SEARCH = "search"
    # Runs CPSAT and SEARCH on every hand and raises EngineDisagreementError when they differ.
    AUDIT = "audit"


def check_multiplier(value: object) -> None:
    """Raise unless ``value`` is a multiplier a rule set may give a close kind."""
    if not isinstance(value, int) or not 0 < value <= 1000:
        raise InvalidOptionError("", value, "a multiplier must be 1 to 1000")


@dataclass(frozen=True, slots=True)
class RuleSet:
    """Every rule option of the rule book; the defaults are the seeds' rules."""

    decks: int = 2
    joker_points: int = 20
    wrap_runs: bool = False
    joker_limit: JokerLimit = JokerLimit.UNLIMITED
    joker_discard: JokerDiscard = JokerDiscard.CLEAN
    discard_taken: DiscardTaken = DiscardTaken.ALLOWED
    multipliers: Mapping[CloseKind, int] = field(default_factory=lambda: DEFAULT_MULTIPLIERS)
    scoring: ScoringRules = ScoringRules()
    engine: Engine = Engine.CPSAT
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        if not isinstance(self.decks, int) or not 1 <= self.decks <= 4:
            raise InvalidOptionError("decks", self.decks, "decks must be 1 to 4")
        if not isinstance(self.joker_points, int) or not 0 <= self.joker_points <= 1000:
            raise InvalidOptionError("joker_points", self.joker_points, "joker points must be 0 to 1000")
        if not isinstance(self.engine, Engine):
            # An engine's name is its value: RuleSet(engine="search") reads as the command line does.
            try:
                object.__setattr__(self, "engine", Engine(self.engine))
            except ValueError:
                raise InvalidOptionError("engine", self.engine, f"engine must be one of {', '.join(Engine)}") from None
        table = dict(DEFAULT_MULTIPLIERS)
        for kind, value in dict(self.multipliers).items():
            if not isinstance(kind, CloseKind):
                raise InvalidOptionError("multipliers", kind, "unknown close kind")
            with rooted_at(f"multipliers[{kind.value}]"):
                check_multiplier(value)
            table[kind] = value
        # Frozen: the table is completed with defaults once, so lookups never miss.
        object.__setattr__(self, "multipliers", MappingProxyType(table))
        # Rule sets key every cache of the engines: hash once, not on every lookup.
        key = (
            self.decks,
            self.joker_points,
            self.wrap_runs,
            self.joker_limit,
            self.joker_discard,
            self.discard_taken,
            tuple(table.items()),
            self.scoring,
            self.engine,
        )
        object.__setattr__(self, "_hash", hash(key))
        for name in ("start_score", "target", "close_bonus", "limit"):
            value = getattr(self.scoring, name)
            if value is not None and (not isinstance(value, int) or abs(value) > 10**9):
                raise InvalidOptionError(f"scoring.{name}", value, "must be an integer of at most 10^9")

    def __hash__(self) -> int:
        return self._hash

    def multiplier(self, kind: CloseKind) -> int:
        """The multiplier of a close kind under this rule set."""
        return self.multipliers[kind]

    def with_options(self, **changes: object) -> RuleSet:
        """A copy with some options changed."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def linking_key(self) -> tuple[int, int, bool, JokerLimit]:
        """The options that change a best linking, for caches keyed on rules."""
        return (self.decks, self.joker_points, self.wrap_runs, self.joker_limit)


@dataclass(frozen=True, slots=True)
class RuleOption:
    """A rule option of ``RuleSet``, declared once: its field (the ``RuleSet`` attribute and the
    ``RuleOptions`` proto field), its kind (``int``, ``bool`` or an enum), a line of help, and its
    notation tag. The command line's flag, the notation's tag, the rule book's table of options
    and the tests of them all come from here (``RULE_OPTIONS``); the scoring rules and the
    multiplier table, which are tables rather than one value, have their own."""

    name: str
    kind: type
    help: str
    tag: str

    @property
    def flag(self) -> str:
        """The command line's flag: ``--joker-points`` for ``joker_points``."""
        return "--" + self.name.replace("_", "-")

    @property
    def default(self) -> object:
        """The rule book's default."""
        return getattr(RuleSet(), self.name)

    @property
    def choices(self) -> tuple[str, ...]:
        """The spellings an enum option takes (none for a number or a switch)."""
        if issubclass(self.kind, enum.Enum):
            return tuple(str(member.value) for member in self.kind)
        return ()

    def read(self, text: str) -> object:
        """A value as the notation and the command line spell it; ValueError when it is none."""
        if self.kind is bool:
            return {"true": True, "false": False}[text]
        return self.kind(text)

    def spell(self, value: object) -> str:
        """A value as the notation spells it (the inverse of ``read``)."""
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value.value) if isinstance(value, enum.Enum) else str(value)


# In the order the notation writes their tags (the scoring rules' tags come before the engine's).
RULE_OPTIONS: tuple[RuleOption, ...] = (
    RuleOption("decks", int, "decks in play, 1 to 4", "Decks"),
    RuleOption("joker_points", int, "points of an unlinked joker, 0 to 1000", "JokerPoints"),
    RuleOption("wrap_runs", bool, "runs may go round the corner (K-A-2)", "WrapRuns"),
    RuleOption("joker_limit", JokerLimit, "how many jokers a group may hold", "JokerLimit"),
    RuleOption("joker_discard", JokerDiscard, "what a joker laid face down to close does", "JokerDiscard"),
    RuleOption(
        "discard_taken", DiscardTaken, "may a card taken from the discard pile be thrown back at once", "DiscardTaken"
    ),
    RuleOption("engine", Engine, "the linking engine (every engine gives the same answer)", "Engine"),
)


def rule_options_table() -> str:
    """The rule book's table of options (docs/rules.md, between its markers), from ``RULE_OPTIONS``."""
    rows = ["| option | flag | notation | values | default | what it says |", "|---|---|---|---|---|---|"]
    for option in RULE_OPTIONS:
        if option.choices:
            values = ", ".join(f"`{choice}`" for choice in option.choices)
        elif option.kind is bool:
            values = "`true`, `false`"
        else:
            values = "a whole number"
        rows.append(
            f"| `{option.name}` | `{option.flag}` | `[{option.tag} ...]` | {values} | "
            f"`{option.spell(option.default)}` | {option.help} |"
        )
    return "\n".join(rows) + "\n"
