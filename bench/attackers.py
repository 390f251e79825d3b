"""Hostile clients that ``bench.hostile`` runs in processes of their own, so that the CPU they take
is not taken from the load generator's interpreter.

    python -m bench.attackers ATTACK TARGET [options]

The attack starts once its connections are open, which it says with a line ``ready`` on stdout,
and runs until its stdin is closed; then it prints one JSON line of what happened (outcomes by
status code, connections opened and closed) and exits. The attacks:

- ``oversized``: SolveHand requests of about 800 KB holding 200,000 card codes (over the count
  limit, so each is refused), 8 in flight on each of ``--connections`` connections, each sent again
  as soon as it is refused;
- ``watches``: health Watch calls naming a 1 MB service, without a key, 10 in flight on each of
  ``--connections`` connections that stay open; a watch the server takes is held to the end;
- ``flood``: ``--in-flight`` cache-busting CheckClose calls (11 random cards, the audit engine)
  kept in flight with ``--key``, over connections that reach every one of ``--workers`` server
  processes; a refused call is sent again after 2 ms;
- ``logflood``: calls with an 8 KB method path, without a key, 50 at a time on one raw HTTP/2
  connection (``bench.stall``), a new batch as soon as the last one ended;
- ``silent``: ``--count`` TCP connections from ``--source`` that never send a byte, each reopened
  as soon as the server closes it.

``--key`` is an API key sent as ``authorization: Bearer`` (``oversized`` and ``flood``); the keyed
attacks reach every worker by opening connections until valid calls on them name every process
(the server runs with ``--debug-pid``).
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import random
import select
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402

from bench.stall import Staller  # noqa: E402
from referee._gen.remigio.referee.v1 import referee_pb2 as pb  # noqa: E402
from referee.game.cards import deck  # noqa: E402

SERVICE = "/remigio.referee.v1.RefereeService"
WATCH = "/grpc.health.v1.Health/Watch"
HAND = "AH 2H 3H 5C 5D 5S KS KD 9C 4D".split()
PID_KEY = "x-referee-pid"
ATTACKS = ("oversized", "watches", "flood", "logflood", "silent", "slowbodies")


def varint(value: int) -> bytes:
    """A protobuf varint."""
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def oversized_request() -> bytes:
    """A SolveHandRequest of about 800 KB: 200,000 card codes in ``cards`` (field 1)."""
    element = varint(1 << 3 | 2) + varint(2) + b"AC"
    return element * 200_000


def watch_request() -> bytes:
    """A HealthCheckRequest naming a 1,000,000-byte service (field 1): under the 1 MiB message limit."""
    return varint(1 << 3 | 2) + varint(1_000_000) + b"x" * 1_000_000


def _channel(target: str) -> grpc.Channel:
    """A channel with a connection of its own (channels share connections by default)."""
    options = [("grpc.use_local_subchannel_pool", 1), ("grpc.max_send_message_length", 4 << 20)]
    return grpc.insecure_channel(target, options=options)


def _metadata(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),) if key else ()


def on_every_worker(target: str, key: str, workers: int, tries: int = 24) -> list[grpc.Channel]:
    """Channels whose connections reach every one of ``workers`` server processes (fewer if the
    kernel would not spread ``tries`` connections so): one valid call on each names its process."""
    kept: dict[str, grpc.Channel] = {}
    stray: list[grpc.Channel] = []
    request = pb.SolveHandRequest(cards=HAND)
    for _ in range(tries):
        channel = _channel(target)
        solve = channel.unary_unary(
            f"{SERVICE}/SolveHand",
            request_serializer=pb.SolveHandRequest.SerializeToString,
            response_deserializer=pb.SolveHandResponse.FromString,
        )
        _, call = solve.with_call(request, timeout=30, metadata=_metadata(key))
        pid = dict(call.trailing_metadata() or ()).get(PID_KEY, "?")
        if pid in kept:
            stray.append(channel)
        else:
            kept[pid] = channel
        if len(kept) >= workers:
            break
    for channel in stray:
        channel.close()
    return list(kept.values())


class Attack:
    """What every attack shares: a stop event, outcomes by name, a lock, when it was ready."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.outcomes: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.ready_at = 0.0

    def ready(self) -> None:
        """Say that the attack's connections are open and it starts now."""
        self.ready_at = time.monotonic()
        print("ready", flush=True)

    def count(self, outcome: str, n: int = 1) -> None:
        with self.lock:
            self.outcomes[outcome] += n


def _send_on_each(
    channels: list[grpc.Channel], send: Callable[[grpc.Channel], None], after: Callable[[], object] | None = None
) -> None:
    """``send(channel)`` on a thread per channel until each returns; then ``after()``, and the channels closed."""
    threads = [threading.Thread(target=send, args=(channel,)) for channel in channels]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if after is not None:
        after()
    for channel in channels:
        channel.close()


def oversized(args: argparse.Namespace, attack: Attack) -> None:
    """Refused 800 KB requests, 8 in flight per connection."""
    request = oversized_request()
    channels = on_every_worker(args.target, args.key, args.workers)
    while len(channels) < args.connections:
        channels.append(_channel(args.target))
    attack.ready()

    def send(channel: grpc.Channel) -> None:
        call = channel.unary_unary(f"{SERVICE}/SolveHand", request_serializer=None, response_deserializer=None)
        while not attack.stop.is_set():
            futures = [call.future(request, timeout=30, metadata=_metadata(args.key)) for _ in range(8)]
            for future in futures:
                attack.count(future.code().name)

    _send_on_each(channels, send)


def watches(args: argparse.Namespace, attack: Attack) -> None:
    """Keyless Watch calls naming a 1 MB service, 10 in flight per connection."""
    request = watch_request()
    channels = [_channel(args.target) for _ in range(args.connections)]
    for channel in channels:
        grpc.channel_ready_future(channel).result(timeout=30)
    attack.ready()
    held: list[grpc.Call] = []

    def send(channel: grpc.Channel) -> None:
        watch = channel.unary_stream(WATCH, request_serializer=None, response_deserializer=None)
        while not attack.stop.is_set():
            wave = [watch(request, timeout=60) for _ in range(10)]
            for call in wave:
                try:
                    next(call)
                except grpc.RpcError as error:
                    attack.count(error.code().name)
                except StopIteration:
                    attack.count("OK")
                else:  # the server took the watch: hold it, as a leaking server would
                    attack.count("held")
                    with attack.lock:
                        held.append(call)

    _send_on_each(channels, send, after=lambda: [call.cancel() for call in held])


def flood(args: argparse.Namespace, attack: Attack) -> None:
    """``--in-flight`` heavy CheckClose calls kept in flight with one key."""
    cards = [card.code() for card in deck(2)]
    rng = random.Random(7)
    channels = on_every_worker(args.target, args.key, args.workers)
    stubs = [
        channel.unary_unary(
            f"{SERVICE}/CheckClose",
            request_serializer=pb.CheckCloseRequest.SerializeToString,
            response_deserializer=pb.CheckCloseResponse.FromString,
        )
        for channel in channels
    ]
    live = threading.Semaphore(0)
    attack.ready()

    def launch(n: int) -> None:
        with attack.lock:
            hand = rng.sample(cards, 11)
        request = pb.CheckCloseRequest(cards=hand, rules=pb.RuleOptions(engine=pb.ENGINE_AUDIT))
        future = stubs[n % len(stubs)].future(request, timeout=30, metadata=_metadata(args.key))
        future.add_done_callback(lambda done: finished(n, done))

    def finished(n: int, future: grpc.Future) -> None:
        code = future.code()
        attack.count(code.name)
        if attack.stop.is_set():
            live.release()
            return
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            time.sleep(0.002)  # refused at once: again, as a flood does, without spinning
        launch(n)

    for n in range(args.in_flight):
        launch(n)
    attack.stop.wait()
    deadline = time.monotonic() + 5  # the calls in flight end; closing the channels cancels the rest
    for _ in range(args.in_flight):
        if not live.acquire(timeout=max(0.0, deadline - time.monotonic())):
            break
    for channel in channels:
        channel.close()


def logflood(args: argparse.Namespace, attack: Attack) -> None:
    """Calls with an 8 KB method path, 50 at a time on one connection."""
    path = "/" + "x" * 8_000
    staller = Staller(args.target)
    attack.ready()
    try:
        while not attack.stop.is_set():
            if staller.closed.is_set() or staller.goaway.is_set():
                attack.count("connection closed")
                staller.close()
                staller = Staller(args.target)
            streams = [staller.call(path, b"") for _ in range(50)]
            ended = staller.wait_ended(streams, timeout=10)
            for stream in streams:
                attack.count(_status_name(ended.get(stream, "unanswered")))
    finally:
        staller.close()


_STATUS_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}


def _status_name(ended: str) -> str:
    """A Staller's record of how a call ended (a grpc-status, or ``RST n``) as a status name."""
    return _STATUS_NAMES.get(int(ended), ended) if ended.isdigit() else ended


def sources(first: str, count: int) -> list[str]:
    """``count`` loopback addresses from ``first`` on (127.0.0.0/8 is all loopback on Linux)."""
    start = int(ipaddress.IPv4Address(first))
    return [str(ipaddress.IPv4Address(start + i)) for i in range(count)]


def silent(args: argparse.Namespace, attack: Attack) -> None:
    """``--count`` silent connections from each of ``--sources`` addresses from ``--source`` on,
    reopened as the server closes them."""
    host, port = args.target.rsplit(":", 1)
    poller = select.epoll()
    held: dict[int, tuple[str, socket.socket]] = {}
    per_source: Counter[str] = Counter()
    addresses = sources(args.source, args.sources)
    wanted = args.count * len(addresses)
    opened = closed = failed = 0
    announce_by = time.monotonic() + 5
    announced = False
    try:
        while not attack.stop.is_set():
            for source in addresses:
                while per_source[source] < args.count and not attack.stop.is_set():
                    sock = socket.socket()
                    try:
                        sock.bind((source, 0))
                        sock.settimeout(2)
                        sock.connect((host, int(port)))
                    except OSError:
                        sock.close()
                        failed += 1
                        time.sleep(0.01)
                        break
                    sock.setblocking(False)
                    held[sock.fileno()] = (source, sock)
                    per_source[source] += 1
                    poller.register(sock.fileno(), select.EPOLLIN | select.EPOLLRDHUP)
                    opened += 1
            if not announced and (len(held) >= wanted or time.monotonic() > announce_by):
                attack.ready()
                announced = True
            for fd, _ in poller.poll(0.05):
                source, sock = held[fd]
                try:
                    gone = sock.recv(65536) == b""
                except BlockingIOError:
                    gone = False
                except OSError:
                    gone = True
                if gone:
                    poller.unregister(fd)
                    del held[fd]
                    per_source[source] -= 1
                    sock.close()
                    closed += 1
    finally:
        for _, sock in held.values():
            sock.close()
        poller.close()
    attack.count("opened", opened)
    attack.count("closed by the server", closed)
    attack.count("connect failed", failed)


def slowbodies(args: argparse.Namespace, attack: Attack) -> None:
    """``--count`` JSON POSTs from each of ``--sources`` addresses from ``--source`` on, each with
    whole headers announcing a body of ``--content-length`` bytes, then one body byte every
    ``--byte-every`` seconds, reopened as the server ends them (unless ``--no-reopen``). Counts how long the server let
    each live: ``longest`` (seconds, of those it ended) and ``oldest_open`` (at the end)."""
    host, port = args.target.rsplit(":", 1)
    head = (
        f"POST /v1/hands:solve HTTP/1.1\r\nHost: {host}\r\ncontent-type: application/json\r\n"
        f"content-length: {args.content_length}\r\n\r\n"
    ).encode()
    poller = select.epoll()
    held: dict[int, tuple[str, socket.socket, float]] = {}
    per_source: Counter[str] = Counter()
    addresses = sources(args.source, args.sources)
    wanted = args.count * len(addresses)
    opened = ended = answered = failed = 0
    longest = 0.0
    next_byte = time.monotonic() + args.byte_every
    announce_by = time.monotonic() + 10
    announced = False

    def end(fd: int, now: float) -> None:
        nonlocal ended, longest
        source, sock, since = held.pop(fd)
        poller.unregister(fd)
        per_source[source] -= 1
        sock.close()
        ended += 1
        longest = max(longest, now - since)

    opened_by: Counter[str] = Counter()
    try:
        while not attack.stop.is_set():
            for source in addresses:
                while per_source[source] < args.count and not attack.stop.is_set():
                    if not args.reopen and opened_by[source] >= args.count:
                        break  # each slow body once: those the server ends stay ended
                    opened_by[source] += 1
                    sock = socket.socket()
                    try:
                        sock.bind((source, 0))
                        sock.settimeout(2)
                        sock.connect((host, int(port)))
                        sock.sendall(head + b"{")
                    except OSError:
                        sock.close()
                        failed += 1
                        time.sleep(0.01)
                        break
                    sock.setblocking(False)
                    held[sock.fileno()] = (source, sock, time.monotonic())
                    per_source[source] += 1
                    poller.register(sock.fileno(), select.EPOLLIN | select.EPOLLRDHUP)
                    opened += 1
            if not announced and (len(held) >= wanted or time.monotonic() > announce_by):
                attack.ready()
                announced = True
            now = time.monotonic()
            for fd, _ in poller.poll(0.05):
                if fd not in held:
                    continue
                try:
                    data = held[fd][1].recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                answered += data.startswith(b"HTTP/1.1 408")
                end(fd, now)  # an answer before the body is whole, or a close: ended either way
            if now >= next_byte:
                next_byte = now + args.byte_every
                for fd, (_, sock, _) in list(held.items()):
                    try:
                        sock.send(b" ")
                    except OSError:
                        end(fd, now)
    finally:
        now = time.monotonic()
        oldest = max((now - since for _, _, since in held.values()), default=0.0)
        for _, sock, _ in held.values():
            sock.close()
        poller.close()
    attack.count("opened", opened)
    attack.count("ended by the server", ended)
    attack.count("answered 408", answered)
    attack.count("connect failed", failed)
    attack.outcomes["longest"] = round(longest, 2)
    attack.outcomes["oldest_open"] = round(oldest, 2)


RUN = {
    "oversized": oversized,
    "watches": watches,
    "flood": flood,
    "logflood": logflood,
    "silent": silent,
    "slowbodies": slowbodies,
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m bench.attackers", description=__doc__.split("\n\n")[0])
    parser.add_argument("attack", choices=ATTACKS)
    parser.add_argument("target", help="host:port")
    parser.add_argument("--key", default="", help="API key for the keyed attacks")
    parser.add_argument("--workers", type=int, default=1, help="server processes to reach (default 1)")
    parser.add_argument("--connections", type=int, default=2, help="connections (default 2)")
    parser.add_argument("--in-flight", type=int, default=90, help="flood: calls in flight (default 90)")
    parser.add_argument("--count", type=int, default=1_100, help="silent: connections per address (default 1,100)")
    parser.add_argument("--source", default="127.0.0.2", help="silent: local address (default 127.0.0.2)")
    parser.add_argument(
        "--sources", type=int, default=1, help="silent, slowbodies: addresses from --source on (default 1)"
    )
    parser.add_argument("--content-length", type=int, default=1_000_000, help="slowbodies: announced body size")
    parser.add_argument("--byte-every", type=float, default=10.0, help="slowbodies: seconds between body bytes")
    parser.add_argument(
        "--reopen",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="slowbodies: open a new slow body for each the server ends (default on)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one attack until stdin closes; print its outcomes as a JSON line."""
    args = parse_args(argv)
    attack = Attack()

    def wait_for_eof() -> None:
        with contextlib.suppress(OSError, ValueError):
            sys.stdin.read()
        attack.stop.set()

    threading.Thread(target=wait_for_eof, daemon=True).start()
    RUN[args.attack](args, attack)
    seconds = time.monotonic() - attack.ready_at if attack.ready_at else 0.0
    print(json.dumps({**attack.outcomes, "seconds": round(seconds, 2)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
