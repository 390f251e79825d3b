"""The game of a hand (RULES §1-§8): cards, rule options, groups, the linking engines, closes,
scoring, a deal's state and the bounds on what is read. Pure: no gRPC, no protobuf, nothing of the
project outside this package."""
