"""The game of a hand (RULES §1-§8): cards, rule options, groups, the linking engines, closes,
scoring, a deal's state and the bounds on what is read. Pure: no gRPC, no protobuf, nothing of the
project outside this package."""

from referee.game.compiled import extend

# This package's compiled modules, where built for these sources (``referee.game.compiled``).
__path__ = extend(__path__, __name__)
