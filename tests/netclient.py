"""A client of the public ``referee.client.Referee`` that keeps calling until told to stop, run as
a process on a host of ``netns`` while the tests break the network around it.

    python tests/netclient.py TARGET [--unary-threads N] [--deadline S] [--keepalive S] ...

Threads call SolveHand back to back, and one thread sends CheckDisputes streams of ``--cases``
cases back to back, each checked to get every verdict once and in order. It prints ``ready``
once a call and a stream have both succeeded, and on a ``stop`` line (or the end of its input)
finishes its calls and prints one JSON object: every call with its start, end (time.monotonic,
the clock of the whole machine) and status code.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

import grpc

from referee.client import Referee, pb

HAND = "AH 2H 3H 5C 5D 5S KS KD 9C 4D".split()


def main() -> None:
    """Call until told to stop; print the calls."""
    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("--unary-threads", type=int, default=3)
    parser.add_argument("--cases", type=int, default=20)
    parser.add_argument("--deadline", type=float, default=10.0)
    parser.add_argument("--keepalive", type=float, default=1.0)
    parser.add_argument("--keepalive-timeout", type=float, default=1.0)
    parser.add_argument("--reconnect", type=float, default=30.0)
    parser.add_argument("--dns-interval", type=float, default=0.2)
    args = parser.parse_args()
    referee = Referee(
        args.target,
        timeout=args.deadline,
        keepalive=args.keepalive,
        keepalive_timeout=args.keepalive_timeout,
        options=[
            ("grpc.lb_policy_name", "round_robin"),
            ("grpc.dns_min_time_between_resolutions_ms", int(args.dns_interval * 1000)),
        ],
    )
    stop = threading.Event()
    calls: list[dict[str, Any]] = []
    lock = threading.Lock()
    succeeded = {"unary": threading.Event(), "stream": threading.Event()}

    def record(kind: str, start: float, code: str, detail: str = "") -> None:
        with lock:
            calls.append({"kind": kind, "start": start, "end": time.monotonic(), "code": code, "detail": detail})
        if code == "OK":
            succeeded[kind].set()

    def unary() -> None:
        while not stop.is_set():
            start = time.monotonic()
            try:
                referee.solve_hand(HAND)
            except grpc.RpcError as error:
                record("unary", start, error.code().name, str(error.details())[:200])
            else:
                record("unary", start, "OK")

    def streams() -> None:
        number = 0
        while not stop.is_set():
            number += 1
            ids = [f"s{number}-c{n}" for n in range(args.cases)]
            cases = [pb.CheckDisputesRequest(id=i, hand=pb.HandDispute(cards=HAND, claimed_points=33)) for i in ids]
            start = time.monotonic()
            try:
                got = [verdict.id for verdict in referee.check_disputes(cases, reconnect=args.reconnect)]
            except grpc.RpcError as error:
                record("stream", start, error.code().name, str(error.details())[:200])
                continue
            record("stream", start, "OK" if got == ids else "WRONG", "" if got == ids else json.dumps(got))

    threads = [threading.Thread(target=unary, daemon=True) for _ in range(args.unary_threads)]
    threads.append(threading.Thread(target=streams, daemon=True))
    for thread in threads:
        thread.start()
    for event in succeeded.values():
        event.wait(60)
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    stop.set()
    for thread in threads:
        thread.join(60)
    with lock:
        print(json.dumps({"calls": calls}), flush=True)
    referee.close()


if __name__ == "__main__":
    main()
