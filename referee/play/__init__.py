"""The game as played (RULES §9): deal records and their notation, shuffles and their
commitments, replay, the simulator's bots, and the review of each turn. Imports ``referee.game``
and nothing else of the project."""

from referee.game.compiled import extend

# This package's compiled modules, where built for these sources (``referee.game.compiled``).
__path__ = extend(__path__, __name__)
