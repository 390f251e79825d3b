"""Simulated deal records shared by the record and replay tests, made once per test session.

The corpus covers every rule option, 2 to 10 players (and a few tables of up to the most a deck
deals to), seeded shuffles, explicit decks and stacked decks (a close on the first turn), and a
few deals that never close. Each record comes from ``referee.play.simulate`` with its index as seed,
so a failing record is named by its index. The search engine links the bots' hands: every engine
gives the same answers, and it is the fast one.
"""

from __future__ import annotations

import fcntl
import io
import pickle
import random
from dataclasses import dataclass, fields, is_dataclass, replace
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from referee.game.cards import Card
from referee.game.deal import most_players
from referee.game.rules import (
    CloseKind,
    DiscardTaken,
    Engine,
    JokerDiscard,
    JokerLimit,
    RuleSet,
    ScoringMode,
    ScoringRules,
)
from referee.play.record import DrawSource, Record
from referee.play.replay import Replay, replay
from referee.play.simulate import simulate

CORPUS = 1600


@dataclass(frozen=True, slots=True)
class Played:
    """A simulated record and how it was made."""

    index: int
    record: Record
    seeded: bool
    stacked: bool


def rules_for(rng: random.Random) -> RuleSet:
    """A rule set with every option drawn: decks, joker points, wrap, limits, discards, scoring, a multiplier table."""
    multipliers = {}
    if rng.random() < 0.1:
        multipliers = {kind: rng.randint(1, 12) for kind in rng.sample(list(CloseKind), 3)}
    mode = rng.choice([None, *ScoringMode])
    scoring = ScoringRules(mode=mode)
    if mode is ScoringMode.ELIMINATION and rng.random() < 0.3:
        scoring = ScoringRules(mode=mode, limit=rng.choice((50, 200)))
    return RuleSet(
        decks=rng.choice((1, 2, 2, 2, 3, 4)),
        joker_points=rng.choice((0, 20, 20, 25, 50)),
        wrap_runs=rng.random() < 0.2,
        joker_limit=rng.choice(list(JokerLimit)),
        joker_discard=rng.choice(list(JokerDiscard)),
        discard_taken=rng.choice(list(DiscardTaken)),
        multipliers=multipliers,
        scoring=scoring,
        engine=Engine.SEARCH,
    )


# A directory every xdist worker of this run shares (set by conftest), where the first worker to
# need the corpus leaves it for the others: it takes seconds to simulate, and each worker would
# otherwise make the same records again. None: made here.
SHARED: Path | None = None


@lru_cache(maxsize=1)
def corpus() -> tuple[Played, ...]:
    """The shared records, the same on every run."""
    if SHARED is None:
        return _simulated()
    with open(SHARED / "played-corpus.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the others wait while the first one simulates
        path = SHARED / f"played-corpus-{CORPUS}.pickle"
        if path.exists():
            return pickle.loads(path.read_bytes())  # noqa: S301 - written by this run's own worker
        made = _simulated()
        part = path.with_suffix(".part")
        part.write_bytes(_pickled(made))
        part.replace(path)
        return made


def _pickled(value: object) -> bytes:
    out = io.BytesIO()
    _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return out.getvalue()


class _Pickler(pickle.Pickler):
    """Pickles every dataclass so that it is made again through its constructor when read: the
    fields a constructor derives (a rule set's hash, which differs from process to process, a
    card's index) are derived afresh in the reading process."""

    def reducer_override(self, obj: object) -> Any:
        if is_dataclass(obj) and not isinstance(obj, type):
            return _rebuilt, (type(obj), {f.name: getattr(obj, f.name) for f in fields(obj) if f.init})
        if isinstance(obj, MappingProxyType):  # a rule set's multipliers
            return _proxy, (dict(obj),)
        return NotImplemented


def _rebuilt(cls: type, values: dict[str, object]) -> object:
    return cls(**values)


def _proxy(values: dict[object, object]) -> MappingProxyType[object, object]:
    return MappingProxyType(values)


def _simulated() -> tuple[Played, ...]:
    rng = random.Random(20261201)
    played = []
    for index in range(CORPUS):
        rules = rules_for(rng)
        most = most_players(rules.decks)
        players = rng.randint(2, min(10, most)) if rng.random() < 0.97 else rng.randint(2, most)
        stacked = rng.random() < 0.12
        seeded = not stacked and rng.random() < 0.5
        closing = rng.random() < 0.97
        max_turns = 300 if closing else rng.randint(0, 150)
        record = simulate(index, players, rules, seeded=seeded, stacked=stacked, closing=closing, max_turns=max_turns)
        played.append(Played(index, record, seeded, stacked))
    return tuple(played)


def before(record: Record, turn: int) -> Replay:
    """The replay of the turns before ``turn`` (1-based): the state that turn starts from."""
    return replay(replace(record, turns=record.turns[: turn - 1]))


def drawn_by(record: Record, turn: int) -> Card | None:
    """The card turn ``turn`` draws, or None when it draws from the empty stock (a reshuffle)."""
    state = before(record, turn)
    if record.turns[turn - 1].draw is DrawSource.DISCARD:
        return state.discard_pile[-1]
    return state.stock[0] if state.stock else None
