"""Deal scoring and match progression for the three modes (RULES §5)."""

from __future__ import annotations

from dataclasses import dataclass

from referee.game.closing import Close, check_close
from referee.game.deal import Deal, check_deal
from referee.game.errors import InvalidDealError
from referee.game.linking import Linking, best_linking
from referee.game.rules import RuleSet, ScoringMode, ScoringRules


@dataclass(frozen=True, slots=True)
class PlayerResult:
    """One player's outcome: the best linking, points, score change, new score, out or not."""

    name: str
    closer: bool
    linking: Linking
    points: int
    score_change: int
    score: int
    eliminated: bool


@dataclass(frozen=True, slots=True)
class DealResult:
    """A scored deal: the close verdict, every player's outcome, and whether the match ended."""

    close: Close
    players: tuple[PlayerResult, ...]
    scoring: ScoringRules
    match_over: bool
    winner: str | None


def out_by_score(score: int, scoring: ScoringRules) -> bool:
    """True when ``score`` puts a player out of the match under resolved ``scoring``."""
    if scoring.mode is ScoringMode.POOL:
        return score < 0
    if scoring.mode is ScoringMode.ELIMINATION:
        assert scoring.limit is not None
        return score > scoring.limit
    return False


def check_reachable(score: int, scoring: ScoringRules, field: str) -> None:
    """Raise naming ``field`` when no match under resolved ``scoring`` reaches ``score`` before a
    deal (RULES §5): the player would be out already, the match over, or the score below the start
    where scores only grow."""
    assert scoring.start_score is not None and scoring.target is not None
    mode = scoring.mode
    assert mode is not None
    if out_by_score(score, scoring):
        raise InvalidDealError(field, score, "this score is already out of the match")
    if mode is not ScoringMode.ELIMINATION and score >= scoring.target:
        raise InvalidDealError(
            field, score, f"this score has reached the target {scoring.target}: the match is already over"
        )
    if mode is not ScoringMode.POOL and score < scoring.start_score:
        raise InvalidDealError(
            field, score, f"below the start score {scoring.start_score}; scores only grow in {mode.value}"
        )


def score_deal(deal: Deal, rules: RuleSet) -> DealResult:
    """Check and score an end-of-deal state; an invalid close scores nothing."""
    check_deal(deal, rules)
    return _scored(deal, rules, None)


def score_replayed(deal: Deal, rules: RuleSet, close: Close) -> DealResult:
    """Score the end state of a replayed deal record, ``close`` the replay's verdict on its close:
    what ``score_deal`` gives, without checking again what the replay made sure of (the deal's
    players, hands and cards, and the close's own cards)."""
    return _scored(deal, rules, close)


def _scored(deal: Deal, rules: RuleSet, close: Close | None) -> DealResult:
    scoring = rules.scoring.resolved(len(deal.players))
    assert scoring.start_score is not None and scoring.target is not None and scoring.close_bonus is not None
    before = [scoring.start_score if p.score is None else p.score for p in deal.players]
    for i, score in enumerate(before):
        check_reachable(score, scoring, f"players[{i}].score")
    closer = deal.closer_hand
    if close is None:
        close = check_close(closer.cards, deal.discard, rules, field=f"players[{deal.closer}].cards")
    linkings = [
        close.linking if i == deal.closer else best_linking(p.cards, rules, field=f"players[{i}].cards")
        for i, p in enumerate(deal.players)
    ]
    changes = [0] * len(deal.players)
    if close.valid:
        for i, linking in enumerate(linkings):
            if i == deal.closer:
                continue
            owed = linking.points * close.multiplier
            if scoring.mode is ScoringMode.ELIMINATION:
                changes[i] = owed
            else:
                changes[deal.closer] += owed
                if scoring.mode is ScoringMode.POOL:
                    changes[i] = -owed
        if scoring.mode is ScoringMode.POOL:
            # The bonus is added after the multiplier, never multiplied.
            changes[deal.closer] += scoring.close_bonus
    after = [b + c for b, c in zip(before, changes)]
    out = [out_by_score(s, scoring) for s in after]
    players = tuple(
        PlayerResult(
            name=p.name,
            closer=i == deal.closer,
            linking=linkings[i],
            # P is reported for everyone; the closer is never charged their own (RULES §5).
            points=linkings[i].points,
            score_change=changes[i],
            score=after[i],
            eliminated=out[i],
        )
        for i, p in enumerate(deal.players)
    )
    winner = _winner(scoring, players, deal.closer)
    return DealResult(close, players, scoring, winner is not None, winner)


def _winner(scoring: ScoringRules, players: tuple[PlayerResult, ...], closer: int) -> str | None:
    left = [p for p in players if not p.eliminated]
    if scoring.mode in (ScoringMode.HEAD_TO_HEAD, ScoringMode.POOL):
        assert scoring.target is not None
        # Only the closer gains points in these modes and every score comes in below the target,
        # so only the closer can reach it. Should overridden parameters ever let two reach it, the
        # higher score wins, then the closer (RULES §5).
        reached = [(p.score, i == closer, -i) for i, p in enumerate(players) if p.score >= scoring.target]
        if reached:
            return players[-max(reached)[2]].name
    if scoring.mode is not ScoringMode.HEAD_TO_HEAD and len(left) == 1:
        return left[0].name
    return None
