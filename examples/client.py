"""A Python client of the referee: a hand, a close, the sample deal and the sample disputes.

    .venv/bin/python examples/client.py [HOST:PORT]

It needs the package installed (``pip install .``, or ``make venv``) and a server listening
(``make serve``). A server that wants a key gets the one in ``REMIGIO_API_KEY``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from google.protobuf import json_format

from referee.client import Referee, pb

# The sample files beside this script, wherever it is run from.
HERE = Path(__file__).resolve().parent


def main(address: str) -> None:
    """Ask the referee at ``address`` each question and print its answers."""
    with Referee(address, api_key=os.environ.get("REMIGIO_API_KEY") or None, timeout=30) as referee:
        linking = referee.solve_hand("AH 2H 3H 5C 5D 5S KS KD 9C JK").linking
        groups = ", ".join(" ".join(group.cards) for group in linking.groups)
        print(f"best linking: {groups}; unlinked {' '.join(linking.unlinked)}; {linking.points} points")

        close = referee.check_close("3H 4H 5H 6H JK 8H 9H 10H JH QH 2C").close
        kind = pb.CloseKind.Name(close.kind)
        print(f"close: valid {close.valid}, {kind} x{close.multiplier}, discard {close.discard}")

        request = json_format.Parse((HERE / "deal.json").read_text(encoding="utf-8"), pb.ScoreDealRequest())
        for player in referee.score_deal(request).players:
            out = " (out)" if player.eliminated else ""
            print(f"{player.name}: {player.points} points, change {player.score_change:+d}, score {player.score}{out}")

        lines = (HERE / "disputes.jsonl").read_text(encoding="utf-8").splitlines()
        cases = [json_format.Parse(line, pb.CheckDisputesRequest()) for line in lines if line.strip()]
        for verdict in referee.check_disputes(cases):
            print(f"{verdict.id}: {pb.DisputeOutcome.Name(verdict.outcome).removeprefix('DISPUTE_OUTCOME_')}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051")
