"""The game as played (RULES §9): deal records and their notation, shuffles and their
commitments, replay, the simulator's bots, and the review of each turn. Imports ``referee.game``
and nothing else of the project."""

from referee.play.compiled import extend

# The review's measure compiled for these sources, where it has been built (``referee.play.compiled``).
__path__ = extend(__path__)
