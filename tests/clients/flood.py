"""A client that keeps calls in flight against a referee: the attacker of the fair-share tests.

``python tests/clients/flood.py ADDRESS KEY IN_FLIGHT SECONDS`` keeps IN_FLIGHT cache-busting
CheckClose calls (11 random cards, the audit engine) in flight on one connection for SECONDS, then
prints one JSON line: calls answered and refused, by status code.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from collections import Counter

import grpc

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.game.cards import deck

CARDS = [card.code() for card in deck(2)]


def main() -> int:
    address, key, in_flight, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    metadata = (("authorization", f"Bearer {key}"),) if key != "-" else ()
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()
    done = threading.Event()
    end = time.monotonic() + seconds
    rng = random.Random(7)
    with grpc.insecure_channel(address) as channel:
        stub = referee_pb2_grpc.RefereeServiceStub(channel)
        live = threading.Semaphore(0)

        def launch() -> None:
            with lock:
                cards = rng.sample(CARDS, 11)
            request = pb.CheckCloseRequest(cards=cards, rules=pb.RuleOptions(engine=pb.ENGINE_AUDIT))
            future = stub.CheckClose.future(request, timeout=30, metadata=metadata)
            future.add_done_callback(finished)

        def finished(future: grpc.Future) -> None:
            code = future.code()
            with lock:
                outcomes[code.name] += 1
            if time.monotonic() < end:
                if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    time.sleep(0.002)  # refused at once: try again, as a flood does, without spinning
                launch()
            else:
                live.release()

        for _ in range(in_flight):
            launch()
        for _ in range(in_flight):
            live.acquire(timeout=seconds + 60)
        done.set()
    print(json.dumps(dict(outcomes)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
