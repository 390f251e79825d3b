"""Best linking of a hand (RULES §3): the groups that leave the fewest points unlinked.

Every engine returns the same canonical answer: among the linkings with the fewest unlinked
points, those with the fewest groups (the linking a player would write down: A-J of a suit is one
run of 11, not three runs), and among those the one whose groups, each a sorted tuple of card
indices and listed in that order, come first lexicographically (see ``Linking.rank``). So the answer depends only on the multiset of cards and the rules.
"""

from __future__ import annotations

from referee.game.compiled import extend

# This package's compiled modules, where built for these sources (``referee.game.compiled``).
__path__ = extend(__path__, __name__)

from referee.game.linking.base import Linking, LinkingEngine, linking_from_parts
from referee.game.linking.budget import check_time_left, time_budget
from referee.game.linking.dispatch import (
    LinkingObserver,
    best_linking,
    engine_for,
    forget_linkings,
    linkings_observer,
    links_fully,
    load_engines,
    observe_linkings,
)

__all__ = [
    "Linking",
    "LinkingEngine",
    "LinkingObserver",
    "best_linking",
    "check_time_left",
    "engine_for",
    "forget_linkings",
    "linking_from_parts",
    "links_fully",
    "linkings_observer",
    "load_engines",
    "observe_linkings",
    "time_budget",
]
