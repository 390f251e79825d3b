from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JokerLimit(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOKER_LIMIT_UNSPECIFIED: _ClassVar[JokerLimit]
    JOKER_LIMIT_UNLIMITED: _ClassVar[JokerLimit]
    JOKER_LIMIT_NO_MORE_THAN_NATURALS: _ClassVar[JokerLimit]
    JOKER_LIMIT_ONE_PER_GROUP: _ClassVar[JokerLimit]

class JokerDiscard(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOKER_DISCARD_UNSPECIFIED: _ClassVar[JokerDiscard]
    JOKER_DISCARD_CLEAN: _ClassVar[JokerDiscard]
    JOKER_DISCARD_NOT_CLEAN: _ClassVar[JokerDiscard]
    JOKER_DISCARD_FORBIDDEN: _ClassVar[JokerDiscard]

class Engine(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ENGINE_UNSPECIFIED: _ClassVar[Engine]
    ENGINE_CPSAT: _ClassVar[Engine]
    ENGINE_SEARCH: _ClassVar[Engine]
    ENGINE_AUDIT: _ClassVar[Engine]

class DiscardTaken(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DISCARD_TAKEN_UNSPECIFIED: _ClassVar[DiscardTaken]
    DISCARD_TAKEN_ALLOWED: _ClassVar[DiscardTaken]
    DISCARD_TAKEN_FORBIDDEN: _ClassVar[DiscardTaken]

class CloseKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLOSE_KIND_UNSPECIFIED: _ClassVar[CloseKind]
    CLOSE_KIND_REMIGIO: _ClassVar[CloseKind]
    CLOSE_KIND_STRAIGHT_FLUSH_CLEAN: _ClassVar[CloseKind]
    CLOSE_KIND_STRAIGHT_FLUSH: _ClassVar[CloseKind]
    CLOSE_KIND_COLOR_CLEAN: _ClassVar[CloseKind]
    CLOSE_KIND_COLOR: _ClassVar[CloseKind]
    CLOSE_KIND_LINKED_CLEAN: _ClassVar[CloseKind]
    CLOSE_KIND_LINKED: _ClassVar[CloseKind]

class ScoringMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCORING_MODE_UNSPECIFIED: _ClassVar[ScoringMode]
    SCORING_MODE_HEAD_TO_HEAD: _ClassVar[ScoringMode]
    SCORING_MODE_POOL: _ClassVar[ScoringMode]
    SCORING_MODE_ELIMINATION: _ClassVar[ScoringMode]

class GroupKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    GROUP_KIND_UNSPECIFIED: _ClassVar[GroupKind]
    GROUP_KIND_SAME_RANK: _ClassVar[GroupKind]
    GROUP_KIND_RUN: _ClassVar[GroupKind]
    GROUP_KIND_JOKERS_ONLY: _ClassVar[GroupKind]

class Verdict(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERDICT_UNSPECIFIED: _ClassVar[Verdict]
    VERDICT_CONFIRMED: _ClassVar[Verdict]
    VERDICT_WRONG: _ClassVar[Verdict]
    VERDICT_INVALID: _ClassVar[Verdict]
    VERDICT_VALID_NOT_BEST: _ClassVar[Verdict]
    VERDICT_BEST: _ClassVar[Verdict]

class DisputeOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DISPUTE_OUTCOME_UNSPECIFIED: _ClassVar[DisputeOutcome]
    DISPUTE_OUTCOME_CONFIRMED: _ClassVar[DisputeOutcome]
    DISPUTE_OUTCOME_WRONG: _ClassVar[DisputeOutcome]
    DISPUTE_OUTCOME_INVALID: _ClassVar[DisputeOutcome]
    DISPUTE_OUTCOME_MALFORMED: _ClassVar[DisputeOutcome]
    DISPUTE_OUTCOME_NO_CLAIM: _ClassVar[DisputeOutcome]
    DISPUTE_OUTCOME_ILLEGAL: _ClassVar[DisputeOutcome]

class DrawSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DRAW_SOURCE_UNSPECIFIED: _ClassVar[DrawSource]
    DRAW_SOURCE_STOCK: _ClassVar[DrawSource]
    DRAW_SOURCE_DISCARD: _ClassVar[DrawSource]

class ViolationCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VIOLATION_CODE_UNSPECIFIED: _ClassVar[ViolationCode]
    VIOLATION_CODE_NOT_YOUR_TURN: _ClassVar[ViolationCode]
    VIOLATION_CODE_DRAWN_MISMATCH: _ClassVar[ViolationCode]
    VIOLATION_CODE_CARD_NOT_IN_HAND: _ClassVar[ViolationCode]
    VIOLATION_CODE_DISCARD_TAKEN: _ClassVar[ViolationCode]
    VIOLATION_CODE_RESTOCK_MISSING: _ClassVar[ViolationCode]
    VIOLATION_CODE_RESTOCK_MISMATCH: _ClassVar[ViolationCode]
    VIOLATION_CODE_FALSE_CLOSE: _ClassVar[ViolationCode]
    VIOLATION_CODE_TURN_AFTER_CLOSE: _ClassVar[ViolationCode]
    VIOLATION_CODE_SEED_MISMATCH: _ClassVar[ViolationCode]
    VIOLATION_CODE_UNCOMMITTED_SHUFFLE: _ClassVar[ViolationCode]

class ShuffleProof(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SHUFFLE_PROOF_UNSPECIFIED: _ClassVar[ShuffleProof]
    SHUFFLE_PROOF_COMMITTED: _ClassVar[ShuffleProof]
    SHUFFLE_PROOF_UNCOMMITTED: _ClassVar[ShuffleProof]
    SHUFFLE_PROOF_EXPLICIT_DECK: _ClassVar[ShuffleProof]

class DecisionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DECISION_KIND_UNSPECIFIED: _ClassVar[DecisionKind]
    DECISION_KIND_DRAW: _ClassVar[DecisionKind]
    DECISION_KIND_CLOSE: _ClassVar[DecisionKind]
    DECISION_KIND_THROW: _ClassVar[DecisionKind]

class ReviewMark(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REVIEW_MARK_UNSPECIFIED: _ClassVar[ReviewMark]
    REVIEW_MARK_INACCURACY: _ClassVar[ReviewMark]
    REVIEW_MARK_MISTAKE: _ClassVar[ReviewMark]
    REVIEW_MARK_BLUNDER: _ClassVar[ReviewMark]
    REVIEW_MARK_PASSED_CLOSE: _ClassVar[ReviewMark]
    REVIEW_MARK_FED: _ClassVar[ReviewMark]
JOKER_LIMIT_UNSPECIFIED: JokerLimit
JOKER_LIMIT_UNLIMITED: JokerLimit
JOKER_LIMIT_NO_MORE_THAN_NATURALS: JokerLimit
JOKER_LIMIT_ONE_PER_GROUP: JokerLimit
JOKER_DISCARD_UNSPECIFIED: JokerDiscard
JOKER_DISCARD_CLEAN: JokerDiscard
JOKER_DISCARD_NOT_CLEAN: JokerDiscard
JOKER_DISCARD_FORBIDDEN: JokerDiscard
ENGINE_UNSPECIFIED: Engine
ENGINE_CPSAT: Engine
ENGINE_SEARCH: Engine
ENGINE_AUDIT: Engine
DISCARD_TAKEN_UNSPECIFIED: DiscardTaken
DISCARD_TAKEN_ALLOWED: DiscardTaken
DISCARD_TAKEN_FORBIDDEN: DiscardTaken
CLOSE_KIND_UNSPECIFIED: CloseKind
CLOSE_KIND_REMIGIO: CloseKind
CLOSE_KIND_STRAIGHT_FLUSH_CLEAN: CloseKind
CLOSE_KIND_STRAIGHT_FLUSH: CloseKind
CLOSE_KIND_COLOR_CLEAN: CloseKind
CLOSE_KIND_COLOR: CloseKind
CLOSE_KIND_LINKED_CLEAN: CloseKind
CLOSE_KIND_LINKED: CloseKind
SCORING_MODE_UNSPECIFIED: ScoringMode
SCORING_MODE_HEAD_TO_HEAD: ScoringMode
SCORING_MODE_POOL: ScoringMode
SCORING_MODE_ELIMINATION: ScoringMode
GROUP_KIND_UNSPECIFIED: GroupKind
GROUP_KIND_SAME_RANK: GroupKind
GROUP_KIND_RUN: GroupKind
GROUP_KIND_JOKERS_ONLY: GroupKind
VERDICT_UNSPECIFIED: Verdict
VERDICT_CONFIRMED: Verdict
VERDICT_WRONG: Verdict
VERDICT_INVALID: Verdict
VERDICT_VALID_NOT_BEST: Verdict
VERDICT_BEST: Verdict
DISPUTE_OUTCOME_UNSPECIFIED: DisputeOutcome
DISPUTE_OUTCOME_CONFIRMED: DisputeOutcome
DISPUTE_OUTCOME_WRONG: DisputeOutcome
DISPUTE_OUTCOME_INVALID: DisputeOutcome
DISPUTE_OUTCOME_MALFORMED: DisputeOutcome
DISPUTE_OUTCOME_NO_CLAIM: DisputeOutcome
DISPUTE_OUTCOME_ILLEGAL: DisputeOutcome
DRAW_SOURCE_UNSPECIFIED: DrawSource
DRAW_SOURCE_STOCK: DrawSource
DRAW_SOURCE_DISCARD: DrawSource
VIOLATION_CODE_UNSPECIFIED: ViolationCode
VIOLATION_CODE_NOT_YOUR_TURN: ViolationCode
VIOLATION_CODE_DRAWN_MISMATCH: ViolationCode
VIOLATION_CODE_CARD_NOT_IN_HAND: ViolationCode
VIOLATION_CODE_DISCARD_TAKEN: ViolationCode
VIOLATION_CODE_RESTOCK_MISSING: ViolationCode
VIOLATION_CODE_RESTOCK_MISMATCH: ViolationCode
VIOLATION_CODE_FALSE_CLOSE: ViolationCode
VIOLATION_CODE_TURN_AFTER_CLOSE: ViolationCode
VIOLATION_CODE_SEED_MISMATCH: ViolationCode
VIOLATION_CODE_UNCOMMITTED_SHUFFLE: ViolationCode
SHUFFLE_PROOF_UNSPECIFIED: ShuffleProof
SHUFFLE_PROOF_COMMITTED: ShuffleProof
SHUFFLE_PROOF_UNCOMMITTED: ShuffleProof
SHUFFLE_PROOF_EXPLICIT_DECK: ShuffleProof
DECISION_KIND_UNSPECIFIED: DecisionKind
DECISION_KIND_DRAW: DecisionKind
DECISION_KIND_CLOSE: DecisionKind
DECISION_KIND_THROW: DecisionKind
REVIEW_MARK_UNSPECIFIED: ReviewMark
REVIEW_MARK_INACCURACY: ReviewMark
REVIEW_MARK_MISTAKE: ReviewMark
REVIEW_MARK_BLUNDER: ReviewMark
REVIEW_MARK_PASSED_CLOSE: ReviewMark
REVIEW_MARK_FED: ReviewMark

class Multiplier(_message.Message):
    __slots__ = ("kind", "multiplier")
    KIND_FIELD_NUMBER: _ClassVar[int]
    MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    kind: CloseKind
    multiplier: int
    def __init__(self, kind: _Optional[_Union[CloseKind, str]] = ..., multiplier: _Optional[int] = ...) -> None: ...

class ScoringOptions(_message.Message):
    __slots__ = ("mode", "start_score", "target", "close_bonus", "limit")
    MODE_FIELD_NUMBER: _ClassVar[int]
    START_SCORE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    CLOSE_BONUS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    mode: ScoringMode
    start_score: int
    target: int
    close_bonus: int
    limit: int
    def __init__(self, mode: _Optional[_Union[ScoringMode, str]] = ..., start_score: _Optional[int] = ..., target: _Optional[int] = ..., close_bonus: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class RuleOptions(_message.Message):
    __slots__ = ("decks", "joker_points", "wrap_runs", "joker_limit", "multipliers", "engine", "scoring", "joker_discard", "discard_taken")
    DECKS_FIELD_NUMBER: _ClassVar[int]
    JOKER_POINTS_FIELD_NUMBER: _ClassVar[int]
    WRAP_RUNS_FIELD_NUMBER: _ClassVar[int]
    JOKER_LIMIT_FIELD_NUMBER: _ClassVar[int]
    MULTIPLIERS_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    SCORING_FIELD_NUMBER: _ClassVar[int]
    JOKER_DISCARD_FIELD_NUMBER: _ClassVar[int]
    DISCARD_TAKEN_FIELD_NUMBER: _ClassVar[int]
    decks: int
    joker_points: int
    wrap_runs: bool
    joker_limit: JokerLimit
    multipliers: _containers.RepeatedCompositeFieldContainer[Multiplier]
    engine: Engine
    scoring: ScoringOptions
    joker_discard: JokerDiscard
    discard_taken: DiscardTaken
    def __init__(self, decks: _Optional[int] = ..., joker_points: _Optional[int] = ..., wrap_runs: _Optional[bool] = ..., joker_limit: _Optional[_Union[JokerLimit, str]] = ..., multipliers: _Optional[_Iterable[_Union[Multiplier, _Mapping]]] = ..., engine: _Optional[_Union[Engine, str]] = ..., scoring: _Optional[_Union[ScoringOptions, _Mapping]] = ..., joker_discard: _Optional[_Union[JokerDiscard, str]] = ..., discard_taken: _Optional[_Union[DiscardTaken, str]] = ...) -> None: ...

class Group(_message.Message):
    __slots__ = ("kind", "cards", "stands_for")
    KIND_FIELD_NUMBER: _ClassVar[int]
    CARDS_FIELD_NUMBER: _ClassVar[int]
    STANDS_FOR_FIELD_NUMBER: _ClassVar[int]
    kind: GroupKind
    cards: _containers.RepeatedScalarFieldContainer[str]
    stands_for: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, kind: _Optional[_Union[GroupKind, str]] = ..., cards: _Optional[_Iterable[str]] = ..., stands_for: _Optional[_Iterable[str]] = ...) -> None: ...

class Linking(_message.Message):
    __slots__ = ("groups", "unlinked", "points")
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    UNLINKED_FIELD_NUMBER: _ClassVar[int]
    POINTS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[Group]
    unlinked: _containers.RepeatedScalarFieldContainer[str]
    points: int
    def __init__(self, groups: _Optional[_Iterable[_Union[Group, _Mapping]]] = ..., unlinked: _Optional[_Iterable[str]] = ..., points: _Optional[int] = ...) -> None: ...

class Close(_message.Message):
    __slots__ = ("valid", "kind", "multiplier", "discard", "groups", "reason", "unlinked")
    VALID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    DISCARD_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    UNLINKED_FIELD_NUMBER: _ClassVar[int]
    valid: bool
    kind: CloseKind
    multiplier: int
    discard: str
    groups: _containers.RepeatedCompositeFieldContainer[Group]
    reason: str
    unlinked: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, valid: _Optional[bool] = ..., kind: _Optional[_Union[CloseKind, str]] = ..., multiplier: _Optional[int] = ..., discard: _Optional[str] = ..., groups: _Optional[_Iterable[_Union[Group, _Mapping]]] = ..., reason: _Optional[str] = ..., unlinked: _Optional[_Iterable[str]] = ...) -> None: ...

class ClaimedGroup(_message.Message):
    __slots__ = ("cards",)
    CARDS_FIELD_NUMBER: _ClassVar[int]
    cards: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, cards: _Optional[_Iterable[str]] = ...) -> None: ...

class ClaimVerdict(_message.Message):
    __slots__ = ("field", "verdict", "claimed", "expected", "reason", "player", "player_name")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PLAYER_FIELD_NUMBER: _ClassVar[int]
    PLAYER_NAME_FIELD_NUMBER: _ClassVar[int]
    field: str
    verdict: Verdict
    claimed: str
    expected: str
    reason: str
    player: int
    player_name: str
    def __init__(self, field: _Optional[str] = ..., verdict: _Optional[_Union[Verdict, str]] = ..., claimed: _Optional[str] = ..., expected: _Optional[str] = ..., reason: _Optional[str] = ..., player: _Optional[int] = ..., player_name: _Optional[str] = ...) -> None: ...

class SolveHandRequest(_message.Message):
    __slots__ = ("cards", "rules")
    CARDS_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    cards: _containers.RepeatedScalarFieldContainer[str]
    rules: RuleOptions
    def __init__(self, cards: _Optional[_Iterable[str]] = ..., rules: _Optional[_Union[RuleOptions, _Mapping]] = ...) -> None: ...

class SolveHandResponse(_message.Message):
    __slots__ = ("linking",)
    LINKING_FIELD_NUMBER: _ClassVar[int]
    linking: Linking
    def __init__(self, linking: _Optional[_Union[Linking, _Mapping]] = ...) -> None: ...

class CheckCloseRequest(_message.Message):
    __slots__ = ("cards", "discard", "rules", "claimed_kind", "claimed_multiplier")
    CARDS_FIELD_NUMBER: _ClassVar[int]
    DISCARD_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_KIND_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    cards: _containers.RepeatedScalarFieldContainer[str]
    discard: str
    rules: RuleOptions
    claimed_kind: CloseKind
    claimed_multiplier: int
    def __init__(self, cards: _Optional[_Iterable[str]] = ..., discard: _Optional[str] = ..., rules: _Optional[_Union[RuleOptions, _Mapping]] = ..., claimed_kind: _Optional[_Union[CloseKind, str]] = ..., claimed_multiplier: _Optional[int] = ...) -> None: ...

class CheckCloseResponse(_message.Message):
    __slots__ = ("close", "claims")
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    close: Close
    claims: _containers.RepeatedCompositeFieldContainer[ClaimVerdict]
    def __init__(self, close: _Optional[_Union[Close, _Mapping]] = ..., claims: _Optional[_Iterable[_Union[ClaimVerdict, _Mapping]]] = ...) -> None: ...

class Pile(_message.Message):
    __slots__ = ("cards",)
    CARDS_FIELD_NUMBER: _ClassVar[int]
    cards: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, cards: _Optional[_Iterable[str]] = ...) -> None: ...

class Player(_message.Message):
    __slots__ = ("name", "cards", "score")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CARDS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    name: str
    cards: _containers.RepeatedScalarFieldContainer[str]
    score: int
    def __init__(self, name: _Optional[str] = ..., cards: _Optional[_Iterable[str]] = ..., score: _Optional[int] = ...) -> None: ...

class Deal(_message.Message):
    __slots__ = ("players", "closer", "discard", "discard_pile", "stock", "eliminated")
    PLAYERS_FIELD_NUMBER: _ClassVar[int]
    CLOSER_FIELD_NUMBER: _ClassVar[int]
    DISCARD_FIELD_NUMBER: _ClassVar[int]
    DISCARD_PILE_FIELD_NUMBER: _ClassVar[int]
    STOCK_FIELD_NUMBER: _ClassVar[int]
    ELIMINATED_FIELD_NUMBER: _ClassVar[int]
    players: _containers.RepeatedCompositeFieldContainer[Player]
    closer: int
    discard: str
    discard_pile: Pile
    stock: Pile
    eliminated: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, players: _Optional[_Iterable[_Union[Player, _Mapping]]] = ..., closer: _Optional[int] = ..., discard: _Optional[str] = ..., discard_pile: _Optional[_Union[Pile, _Mapping]] = ..., stock: _Optional[_Union[Pile, _Mapping]] = ..., eliminated: _Optional[_Iterable[str]] = ...) -> None: ...

class PlayerClaim(_message.Message):
    __slots__ = ("player", "groups", "points", "score_change", "new_score")
    PLAYER_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    POINTS_FIELD_NUMBER: _ClassVar[int]
    SCORE_CHANGE_FIELD_NUMBER: _ClassVar[int]
    NEW_SCORE_FIELD_NUMBER: _ClassVar[int]
    player: int
    groups: _containers.RepeatedCompositeFieldContainer[ClaimedGroup]
    points: int
    score_change: int
    new_score: int
    def __init__(self, player: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[ClaimedGroup, _Mapping]]] = ..., points: _Optional[int] = ..., score_change: _Optional[int] = ..., new_score: _Optional[int] = ...) -> None: ...

class DealClaims(_message.Message):
    __slots__ = ("players", "close_kind", "multiplier")
    PLAYERS_FIELD_NUMBER: _ClassVar[int]
    CLOSE_KIND_FIELD_NUMBER: _ClassVar[int]
    MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    players: _containers.RepeatedCompositeFieldContainer[PlayerClaim]
    close_kind: CloseKind
    multiplier: int
    def __init__(self, players: _Optional[_Iterable[_Union[PlayerClaim, _Mapping]]] = ..., close_kind: _Optional[_Union[CloseKind, str]] = ..., multiplier: _Optional[int] = ...) -> None: ...

class ScoreDealRequest(_message.Message):
    __slots__ = ("deal", "rules", "claims")
    DEAL_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    deal: Deal
    rules: RuleOptions
    claims: DealClaims
    def __init__(self, deal: _Optional[_Union[Deal, _Mapping]] = ..., rules: _Optional[_Union[RuleOptions, _Mapping]] = ..., claims: _Optional[_Union[DealClaims, _Mapping]] = ...) -> None: ...

class PlayerResult(_message.Message):
    __slots__ = ("name", "closer", "linking", "points", "score_change", "score", "eliminated")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CLOSER_FIELD_NUMBER: _ClassVar[int]
    LINKING_FIELD_NUMBER: _ClassVar[int]
    POINTS_FIELD_NUMBER: _ClassVar[int]
    SCORE_CHANGE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    ELIMINATED_FIELD_NUMBER: _ClassVar[int]
    name: str
    closer: bool
    linking: Linking
    points: int
    score_change: int
    score: int
    eliminated: bool
    def __init__(self, name: _Optional[str] = ..., closer: _Optional[bool] = ..., linking: _Optional[_Union[Linking, _Mapping]] = ..., points: _Optional[int] = ..., score_change: _Optional[int] = ..., score: _Optional[int] = ..., eliminated: _Optional[bool] = ...) -> None: ...

class ScoreDealResponse(_message.Message):
    __slots__ = ("close", "players", "match_over", "winner", "claims")
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    PLAYERS_FIELD_NUMBER: _ClassVar[int]
    MATCH_OVER_FIELD_NUMBER: _ClassVar[int]
    WINNER_FIELD_NUMBER: _ClassVar[int]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    close: Close
    players: _containers.RepeatedCompositeFieldContainer[PlayerResult]
    match_over: bool
    winner: str
    claims: _containers.RepeatedCompositeFieldContainer[ClaimVerdict]
    def __init__(self, close: _Optional[_Union[Close, _Mapping]] = ..., players: _Optional[_Iterable[_Union[PlayerResult, _Mapping]]] = ..., match_over: _Optional[bool] = ..., winner: _Optional[str] = ..., claims: _Optional[_Iterable[_Union[ClaimVerdict, _Mapping]]] = ...) -> None: ...

class HandDispute(_message.Message):
    __slots__ = ("cards", "rules", "claimed_groups", "claimed_points")
    CARDS_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_GROUPS_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_POINTS_FIELD_NUMBER: _ClassVar[int]
    cards: _containers.RepeatedScalarFieldContainer[str]
    rules: RuleOptions
    claimed_groups: _containers.RepeatedCompositeFieldContainer[ClaimedGroup]
    claimed_points: int
    def __init__(self, cards: _Optional[_Iterable[str]] = ..., rules: _Optional[_Union[RuleOptions, _Mapping]] = ..., claimed_groups: _Optional[_Iterable[_Union[ClaimedGroup, _Mapping]]] = ..., claimed_points: _Optional[int] = ...) -> None: ...

class CheckDisputesRequest(_message.Message):
    __slots__ = ("id", "hand", "close", "deal", "record")
    ID_FIELD_NUMBER: _ClassVar[int]
    HAND_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    DEAL_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    id: str
    hand: HandDispute
    close: CheckCloseRequest
    deal: ScoreDealRequest
    record: ReplayDealRequest
    def __init__(self, id: _Optional[str] = ..., hand: _Optional[_Union[HandDispute, _Mapping]] = ..., close: _Optional[_Union[CheckCloseRequest, _Mapping]] = ..., deal: _Optional[_Union[ScoreDealRequest, _Mapping]] = ..., record: _Optional[_Union[ReplayDealRequest, _Mapping]] = ...) -> None: ...

class CaseError(_message.Message):
    __slots__ = ("field", "value", "message")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    field: str
    value: str
    message: str
    def __init__(self, field: _Optional[str] = ..., value: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class CheckDisputesResponse(_message.Message):
    __slots__ = ("id", "outcome", "claims", "hand", "close", "deal", "record", "error")
    ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    HAND_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    DEAL_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    id: str
    outcome: DisputeOutcome
    claims: _containers.RepeatedCompositeFieldContainer[ClaimVerdict]
    hand: Linking
    close: Close
    deal: ScoreDealResponse
    record: ReplayDealResponse
    error: CaseError
    def __init__(self, id: _Optional[str] = ..., outcome: _Optional[_Union[DisputeOutcome, str]] = ..., claims: _Optional[_Iterable[_Union[ClaimVerdict, _Mapping]]] = ..., hand: _Optional[_Union[Linking, _Mapping]] = ..., close: _Optional[_Union[Close, _Mapping]] = ..., deal: _Optional[_Union[ScoreDealResponse, _Mapping]] = ..., record: _Optional[_Union[ReplayDealResponse, _Mapping]] = ..., error: _Optional[_Union[CaseError, _Mapping]] = ...) -> None: ...

class Seat(_message.Message):
    __slots__ = ("name", "score")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    name: str
    score: int
    def __init__(self, name: _Optional[str] = ..., score: _Optional[int] = ...) -> None: ...

class Shuffle(_message.Message):
    __slots__ = ("algorithm", "server_seed", "server_seed_hash", "client_seed", "nonce")
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    SERVER_SEED_FIELD_NUMBER: _ClassVar[int]
    SERVER_SEED_HASH_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SEED_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    algorithm: str
    server_seed: str
    server_seed_hash: str
    client_seed: str
    nonce: int
    def __init__(self, algorithm: _Optional[str] = ..., server_seed: _Optional[str] = ..., server_seed_hash: _Optional[str] = ..., client_seed: _Optional[str] = ..., nonce: _Optional[int] = ...) -> None: ...

class Turn(_message.Message):
    __slots__ = ("seat", "draw", "drawn", "discard", "close", "restock")
    SEAT_FIELD_NUMBER: _ClassVar[int]
    DRAW_FIELD_NUMBER: _ClassVar[int]
    DRAWN_FIELD_NUMBER: _ClassVar[int]
    DISCARD_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    RESTOCK_FIELD_NUMBER: _ClassVar[int]
    seat: int
    draw: DrawSource
    drawn: str
    discard: str
    close: bool
    restock: Pile
    def __init__(self, seat: _Optional[int] = ..., draw: _Optional[_Union[DrawSource, str]] = ..., drawn: _Optional[str] = ..., discard: _Optional[str] = ..., close: _Optional[bool] = ..., restock: _Optional[_Union[Pile, _Mapping]] = ...) -> None: ...

class DealRecord(_message.Message):
    __slots__ = ("seats", "dealer", "deck", "shuffle", "turns", "eliminated")
    SEATS_FIELD_NUMBER: _ClassVar[int]
    DEALER_FIELD_NUMBER: _ClassVar[int]
    DECK_FIELD_NUMBER: _ClassVar[int]
    SHUFFLE_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    ELIMINATED_FIELD_NUMBER: _ClassVar[int]
    seats: _containers.RepeatedCompositeFieldContainer[Seat]
    dealer: int
    deck: Pile
    shuffle: Shuffle
    turns: _containers.RepeatedCompositeFieldContainer[Turn]
    eliminated: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, seats: _Optional[_Iterable[_Union[Seat, _Mapping]]] = ..., dealer: _Optional[int] = ..., deck: _Optional[_Union[Pile, _Mapping]] = ..., shuffle: _Optional[_Union[Shuffle, _Mapping]] = ..., turns: _Optional[_Iterable[_Union[Turn, _Mapping]]] = ..., eliminated: _Optional[_Iterable[str]] = ...) -> None: ...

class ReplayDealRequest(_message.Message):
    __slots__ = ("record", "rules", "claims", "notation", "stop_after_turn")
    RECORD_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    NOTATION_FIELD_NUMBER: _ClassVar[int]
    STOP_AFTER_TURN_FIELD_NUMBER: _ClassVar[int]
    record: DealRecord
    rules: RuleOptions
    claims: DealClaims
    notation: str
    stop_after_turn: int
    def __init__(self, record: _Optional[_Union[DealRecord, _Mapping]] = ..., rules: _Optional[_Union[RuleOptions, _Mapping]] = ..., claims: _Optional[_Union[DealClaims, _Mapping]] = ..., notation: _Optional[str] = ..., stop_after_turn: _Optional[int] = ...) -> None: ...

class Violation(_message.Message):
    __slots__ = ("turn", "seat", "code", "message")
    TURN_FIELD_NUMBER: _ClassVar[int]
    SEAT_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    turn: int
    seat: int
    code: ViolationCode
    message: str
    def __init__(self, turn: _Optional[int] = ..., seat: _Optional[int] = ..., code: _Optional[_Union[ViolationCode, str]] = ..., message: _Optional[str] = ...) -> None: ...

class ReplayDealResponse(_message.Message):
    __slots__ = ("legal", "violation", "turns_played", "complete", "hands", "discard_pile", "stock", "discard", "result", "claims", "to_play", "closer", "reshuffles", "shuffle_proof")
    LEGAL_FIELD_NUMBER: _ClassVar[int]
    VIOLATION_FIELD_NUMBER: _ClassVar[int]
    TURNS_PLAYED_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    HANDS_FIELD_NUMBER: _ClassVar[int]
    DISCARD_PILE_FIELD_NUMBER: _ClassVar[int]
    STOCK_FIELD_NUMBER: _ClassVar[int]
    DISCARD_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    TO_PLAY_FIELD_NUMBER: _ClassVar[int]
    CLOSER_FIELD_NUMBER: _ClassVar[int]
    RESHUFFLES_FIELD_NUMBER: _ClassVar[int]
    SHUFFLE_PROOF_FIELD_NUMBER: _ClassVar[int]
    legal: bool
    violation: Violation
    turns_played: int
    complete: bool
    hands: _containers.RepeatedCompositeFieldContainer[Player]
    discard_pile: Pile
    stock: Pile
    discard: str
    result: ScoreDealResponse
    claims: _containers.RepeatedCompositeFieldContainer[ClaimVerdict]
    to_play: int
    closer: int
    reshuffles: int
    shuffle_proof: ShuffleProof
    def __init__(self, legal: _Optional[bool] = ..., violation: _Optional[_Union[Violation, _Mapping]] = ..., turns_played: _Optional[int] = ..., complete: _Optional[bool] = ..., hands: _Optional[_Iterable[_Union[Player, _Mapping]]] = ..., discard_pile: _Optional[_Union[Pile, _Mapping]] = ..., stock: _Optional[_Union[Pile, _Mapping]] = ..., discard: _Optional[str] = ..., result: _Optional[_Union[ScoreDealResponse, _Mapping]] = ..., claims: _Optional[_Iterable[_Union[ClaimVerdict, _Mapping]]] = ..., to_play: _Optional[int] = ..., closer: _Optional[int] = ..., reshuffles: _Optional[int] = ..., shuffle_proof: _Optional[_Union[ShuffleProof, str]] = ...) -> None: ...

class ReviewDealRequest(_message.Message):
    __slots__ = ("record", "rules", "notation")
    RECORD_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    NOTATION_FIELD_NUMBER: _ClassVar[int]
    record: DealRecord
    rules: RuleOptions
    notation: str
    def __init__(self, record: _Optional[_Union[DealRecord, _Mapping]] = ..., rules: _Optional[_Union[RuleOptions, _Mapping]] = ..., notation: _Optional[str] = ...) -> None: ...

class HandProgress(_message.Message):
    __slots__ = ("distance", "improving", "points", "unseen", "outs")
    DISTANCE_FIELD_NUMBER: _ClassVar[int]
    IMPROVING_FIELD_NUMBER: _ClassVar[int]
    POINTS_FIELD_NUMBER: _ClassVar[int]
    UNSEEN_FIELD_NUMBER: _ClassVar[int]
    OUTS_FIELD_NUMBER: _ClassVar[int]
    distance: int
    improving: int
    points: int
    unseen: int
    outs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, distance: _Optional[int] = ..., improving: _Optional[int] = ..., points: _Optional[int] = ..., unseen: _Optional[int] = ..., outs: _Optional[_Iterable[str]] = ...) -> None: ...

class ReviewOption(_message.Message):
    __slots__ = ("choice", "value")
    CHOICE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    choice: str
    value: float
    def __init__(self, choice: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...

class DecisionJudgment(_message.Message):
    __slots__ = ("options", "best", "loss")
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    BEST_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    options: _containers.RepeatedCompositeFieldContainer[ReviewOption]
    best: _containers.RepeatedScalarFieldContainer[str]
    loss: float
    def __init__(self, options: _Optional[_Iterable[_Union[ReviewOption, _Mapping]]] = ..., best: _Optional[_Iterable[str]] = ..., loss: _Optional[float] = ...) -> None: ...

class ReviewedDecision(_message.Message):
    __slots__ = ("kind", "choice", "judged", "omniscient", "marks", "agrees_with_omniscient")
    KIND_FIELD_NUMBER: _ClassVar[int]
    CHOICE_FIELD_NUMBER: _ClassVar[int]
    JUDGED_FIELD_NUMBER: _ClassVar[int]
    OMNISCIENT_FIELD_NUMBER: _ClassVar[int]
    MARKS_FIELD_NUMBER: _ClassVar[int]
    AGREES_WITH_OMNISCIENT_FIELD_NUMBER: _ClassVar[int]
    kind: DecisionKind
    choice: str
    judged: DecisionJudgment
    omniscient: DecisionJudgment
    marks: _containers.RepeatedScalarFieldContainer[ReviewMark]
    agrees_with_omniscient: bool
    def __init__(self, kind: _Optional[_Union[DecisionKind, str]] = ..., choice: _Optional[str] = ..., judged: _Optional[_Union[DecisionJudgment, _Mapping]] = ..., omniscient: _Optional[_Union[DecisionJudgment, _Mapping]] = ..., marks: _Optional[_Iterable[_Union[ReviewMark, str]]] = ..., agrees_with_omniscient: _Optional[bool] = ...) -> None: ...

class ReviewedTurn(_message.Message):
    __slots__ = ("turn", "seat", "before", "drawn", "thrown", "closed", "decisions")
    TURN_FIELD_NUMBER: _ClassVar[int]
    SEAT_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    DRAWN_FIELD_NUMBER: _ClassVar[int]
    THROWN_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    turn: int
    seat: int
    before: HandProgress
    drawn: str
    thrown: str
    closed: bool
    decisions: _containers.RepeatedCompositeFieldContainer[ReviewedDecision]
    def __init__(self, turn: _Optional[int] = ..., seat: _Optional[int] = ..., before: _Optional[_Union[HandProgress, _Mapping]] = ..., drawn: _Optional[str] = ..., thrown: _Optional[str] = ..., closed: _Optional[bool] = ..., decisions: _Optional[_Iterable[_Union[ReviewedDecision, _Mapping]]] = ...) -> None: ...

class SeatReview(_message.Message):
    __slots__ = ("seat", "name", "decisions", "accuracy", "average_loss", "inaccuracies", "mistakes", "blunders", "passed_closes", "fed", "omniscient_differs", "omniscient_agrees")
    SEAT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    ACCURACY_FIELD_NUMBER: _ClassVar[int]
    AVERAGE_LOSS_FIELD_NUMBER: _ClassVar[int]
    INACCURACIES_FIELD_NUMBER: _ClassVar[int]
    MISTAKES_FIELD_NUMBER: _ClassVar[int]
    BLUNDERS_FIELD_NUMBER: _ClassVar[int]
    PASSED_CLOSES_FIELD_NUMBER: _ClassVar[int]
    FED_FIELD_NUMBER: _ClassVar[int]
    OMNISCIENT_DIFFERS_FIELD_NUMBER: _ClassVar[int]
    OMNISCIENT_AGREES_FIELD_NUMBER: _ClassVar[int]
    seat: int
    name: str
    decisions: int
    accuracy: float
    average_loss: float
    inaccuracies: int
    mistakes: int
    blunders: int
    passed_closes: int
    fed: int
    omniscient_differs: int
    omniscient_agrees: int
    def __init__(self, seat: _Optional[int] = ..., name: _Optional[str] = ..., decisions: _Optional[int] = ..., accuracy: _Optional[float] = ..., average_loss: _Optional[float] = ..., inaccuracies: _Optional[int] = ..., mistakes: _Optional[int] = ..., blunders: _Optional[int] = ..., passed_closes: _Optional[int] = ..., fed: _Optional[int] = ..., omniscient_differs: _Optional[int] = ..., omniscient_agrees: _Optional[int] = ...) -> None: ...

class ReviewDealResponse(_message.Message):
    __slots__ = ("legal", "violation", "seats", "turns", "shuffle_proof")
    LEGAL_FIELD_NUMBER: _ClassVar[int]
    VIOLATION_FIELD_NUMBER: _ClassVar[int]
    SEATS_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    SHUFFLE_PROOF_FIELD_NUMBER: _ClassVar[int]
    legal: bool
    violation: Violation
    seats: _containers.RepeatedCompositeFieldContainer[SeatReview]
    turns: _containers.RepeatedCompositeFieldContainer[ReviewedTurn]
    shuffle_proof: ShuffleProof
    def __init__(self, legal: _Optional[bool] = ..., violation: _Optional[_Union[Violation, _Mapping]] = ..., seats: _Optional[_Iterable[_Union[SeatReview, _Mapping]]] = ..., turns: _Optional[_Iterable[_Union[ReviewedTurn, _Mapping]]] = ..., shuffle_proof: _Optional[_Union[ShuffleProof, str]] = ...) -> None: ...

class DrawAnswerRequest(_message.Message):
    __slots__ = ("solve_hand", "check_close", "score_deal", "replay_deal", "review_deal", "dispute", "turns")
    SOLVE_HAND_FIELD_NUMBER: _ClassVar[int]
    CHECK_CLOSE_FIELD_NUMBER: _ClassVar[int]
    SCORE_DEAL_FIELD_NUMBER: _ClassVar[int]
    REPLAY_DEAL_FIELD_NUMBER: _ClassVar[int]
    REVIEW_DEAL_FIELD_NUMBER: _ClassVar[int]
    DISPUTE_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    solve_hand: SolveHandRequest
    check_close: CheckCloseRequest
    score_deal: ScoreDealRequest
    replay_deal: ReplayDealRequest
    review_deal: ReviewDealRequest
    dispute: CheckDisputesRequest
    turns: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, solve_hand: _Optional[_Union[SolveHandRequest, _Mapping]] = ..., check_close: _Optional[_Union[CheckCloseRequest, _Mapping]] = ..., score_deal: _Optional[_Union[ScoreDealRequest, _Mapping]] = ..., replay_deal: _Optional[_Union[ReplayDealRequest, _Mapping]] = ..., review_deal: _Optional[_Union[ReviewDealRequest, _Mapping]] = ..., dispute: _Optional[_Union[CheckDisputesRequest, _Mapping]] = ..., turns: _Optional[_Iterable[int]] = ...) -> None: ...

class Drawing(_message.Message):
    __slots__ = ("caption", "svg")
    CAPTION_FIELD_NUMBER: _ClassVar[int]
    SVG_FIELD_NUMBER: _ClassVar[int]
    caption: str
    svg: str
    def __init__(self, caption: _Optional[str] = ..., svg: _Optional[str] = ...) -> None: ...

class DrawAnswerResponse(_message.Message):
    __slots__ = ("drawings",)
    DRAWINGS_FIELD_NUMBER: _ClassVar[int]
    drawings: _containers.RepeatedCompositeFieldContainer[Drawing]
    def __init__(self, drawings: _Optional[_Iterable[_Union[Drawing, _Mapping]]] = ...) -> None: ...
