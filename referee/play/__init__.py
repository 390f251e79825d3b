"""The game as played (RULES §9): deal records and their notation, shuffles and their
commitments, replay, the simulator's bots, and the review of each turn. Imports ``referee.game``
and nothing else of the project."""
