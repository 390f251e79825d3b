"""The public Python client of the referee service.

    from referee.client import Referee

    with Referee("referee.example.com:443", api_key=key, tls_ca="ca.pem") as referee:
        print(referee.solve_hand("AH 2H 3H 5C 5D 5S KS KD 9C JK").linking.points)

Each method takes the request message, or cards as codes for convenience, and returns the reply
message. gRPC's own retry policy (the channel's service config) sends a call again when the
server is UNAVAILABLE or RESOURCE_EXHAUSTED (or CANCELLED by a server that is stopping), waiting as
the server's pushback says when it says;
``check_disputes`` also sends again the cases a stream ended before answering, after the wait the
server's ``google.rpc.RetryInfo`` names.
"""

from __future__ import annotations

import json
import random
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee._gen.remigio.referee.v1 import referee_pb2_grpc
from referee.connection import (
    KEEPALIVE_SECONDS,
    KEEPALIVE_TIMEOUT_SECONDS,
    Pem,
    access_from,
    add_arguments,
    read_pem,
)

SERVICE = pb.DESCRIPTOR.services_by_name["RefereeService"].full_name
DEFAULT_TIMEOUT = 30.0
# Attempts per unary call (gRPC caps them at 5) and the backoff between them.
RETRY_POLICY = {
    "maxAttempts": 5,
    "initialBackoff": "0.1s",
    "maxBackoff": "5s",
    "backoffMultiplier": 2,
    # CANCELLED: a server stopping gracefully (SIGTERM) cancels the calls it had received but not
    # started, as gRPC's stop does. Every method is pure, so sending a call again is safe; gRPC never
    # retries a call the client cancelled itself.
    "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED", "CANCELLED"],
}
# The unary methods only: CheckDisputes is sent again by ``check_disputes`` itself, which also
# resumes a stream refused midway (gRPC retries a stream only before its first reply).
UNARY_METHODS = ("SolveHand", "CheckClose", "ScoreDeal", "ReplayDeal", "ReviewDeal", "DrawAnswer")
SERVICE_CONFIG = json.dumps(
    {
        "methodConfig": [
            {"name": [{"service": SERVICE, "method": method} for method in UNARY_METHODS], "retryPolicy": RETRY_POLICY}
        ]
    }
)
# CheckDisputes: pauses between streams sent again when the server gave no RetryInfo (seconds).
PAUSE_FIRST, PAUSE_MAX = 0.02, 1.0
# A CheckDisputes stream whose connection was lost (UNAVAILABLE) is sent again, with the cases it
# did not answer, for this long without a verdict before the error stands (seconds): round-robin
# sends it to a replica that still answers, or waits for one to come back.
RECONNECT_SECONDS = 30.0
# gRPC asks DNS again for a ``dns:///`` name when a connection ends, but by default not within
# 30 s of the last time: a replica restarted at a new address would wait that long to be found.
DNS_MIN_SECONDS_BETWEEN_RESOLUTIONS = 5.0


def retry_delay(error: grpc.RpcError) -> float | None:
    """The seconds a refusal's ``google.rpc.RetryInfo`` detail asks to wait, or None when it has none."""
    try:
        status = rpc_status.from_call(error)
    except ValueError:
        return None
    for detail in status.details if status is not None else ():
        info = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            return info.retry_delay.ToNanoseconds() / 1e9
    return None


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _cards(cards: str | Iterable[str]) -> list[str]:
    return cards.split() if isinstance(cards, str) else list(cards)


class Referee:
    """A connection to a referee server (one gRPC channel); close it, or use it as a context manager.

    ``api_key`` is sent as ``authorization: Bearer KEY`` with every call (surrounding whitespace,
    such as a key file's newline, is dropped). TLS is on when any of
    ``tls_ca`` (the CA that signed the server's certificate; None with ``tls=True``: the system's
    CAs), ``tls_cert`` and ``tls_key`` (the client's certificate and key, for mutual TLS) is given,
    each as PEM bytes or a file name. ``timeout`` is each call's deadline in seconds.
    ``keepalive`` and ``keepalive_timeout`` (seconds) bound how long a call waits on a
    connection that went silent (docs/operations.md, "Keepalive"); a server refuses pings more
    often than its ``--min-client-ping-interval``.
    """

    def __init__(
        self,
        target: str,
        *,
        api_key: str | None = None,
        tls_ca: Pem | None = None,
        tls_cert: Pem | None = None,
        tls_key: Pem | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        tls: bool = False,
        server_name: str | None = None,
        keepalive: float = KEEPALIVE_SECONDS,
        keepalive_timeout: float = KEEPALIVE_TIMEOUT_SECONDS,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        for name, seconds in (("keepalive", keepalive), ("keepalive_timeout", keepalive_timeout), ("timeout", timeout)):
            if not 0 < seconds < float("inf"):
                raise ValueError(f"{name}: a number of seconds above 0, not {seconds!r}")
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("tls_cert and tls_key go together (the client's certificate and its private key)")
        if api_key is not None:
            # A key read from a file comes with its newline (`keygen` prints one): read(), as is, works.
            api_key = api_key.strip()
        if api_key is not None and (
            not api_key or not api_key.isascii() or not api_key.isprintable() or " " in api_key
        ):
            raise ValueError("api_key: a key is printable ASCII without spaces (as `remigio-referee keygen` prints it)")
        self.target = target
        self.timeout = timeout
        self._metadata: tuple[tuple[str, str], ...] = (("authorization", f"Bearer {api_key}"),) if api_key else ()
        channel_options: list[tuple[str, Any]] = [
            ("grpc.service_config", SERVICE_CONFIG),
            ("grpc.enable_retries", 1),
            ("grpc.keepalive_time_ms", _ms(keepalive)),
            ("grpc.keepalive_timeout_ms", _ms(keepalive_timeout)),
            # gRPC's other pings (its flow-control probes) wait a minute for their answer, and the
            # keepalive does not end the connection sooner while one is in flight: a stopped
            # server, whose kernel still acknowledges every packet, held calls that long (seen in
            # tests/server/test_hostile_network.py: without this, found only when it was resumed).
            ("grpc.http2.ping_timeout_ms", _ms(keepalive_timeout)),
            # gRPC's default stops pinging after two pings without a DATA frame sent: a stream
            # whose cases are all sent, waiting for verdicts, would lose its watch.
            ("grpc.http2.max_pings_without_data", 0),
            # Servers refuse pings on a connection without calls (GOAWAY after two strikes).
            ("grpc.keepalive_permit_without_calls", 0),
            ("grpc.dns_min_time_between_resolutions_ms", _ms(DNS_MIN_SECONDS_BETWEEN_RESOLUTIONS)),
            *options,
        ]
        if server_name:
            channel_options.append(("grpc.ssl_target_name_override", server_name))
        if tls or tls_ca is not None or tls_cert is not None:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=read_pem(tls_ca, "tls_ca"),
                private_key=read_pem(tls_key, "tls_key"),
                certificate_chain=read_pem(tls_cert, "tls_cert"),
            )
            self.channel = grpc.secure_channel(target, credentials, options=channel_options)
        else:
            self.channel = grpc.insecure_channel(target, options=channel_options)
        self.stub = referee_pb2_grpc.RefereeServiceStub(self.channel)
        self._closed = False

    def __enter__(self) -> Referee:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel; calls in progress are cancelled."""
        self._closed = True
        self.channel.close()

    def __repr__(self) -> str:
        return f"Referee({self.target!r})"

    def _timeout(self, timeout: float | None) -> float:
        return self.timeout if timeout is None else timeout

    def solve_hand(
        self,
        hand: pb.SolveHandRequest | str | Iterable[str],
        *,
        rules: pb.RuleOptions | None = None,
        timeout: float | None = None,
    ) -> pb.SolveHandResponse:
        """The best linking of a hand: a request, or its cards as codes (``"AH 2H JK"`` or a list)."""
        request = (
            hand if isinstance(hand, pb.SolveHandRequest) else pb.SolveHandRequest(cards=_cards(hand), rules=rules)
        )
        reply: pb.SolveHandResponse = self.stub.SolveHand(
            request, timeout=self._timeout(timeout), metadata=self._metadata
        )
        return reply

    def check_close(
        self,
        close: pb.CheckCloseRequest | str | Iterable[str],
        *,
        discard: str = "",
        rules: pb.RuleOptions | None = None,
        timeout: float | None = None,
    ) -> pb.CheckCloseResponse:
        """The verdict on a close: a request, or 11 cards as codes (10 and ``discard``)."""
        request = (
            close
            if isinstance(close, pb.CheckCloseRequest)
            else pb.CheckCloseRequest(cards=_cards(close), discard=discard, rules=rules)
        )
        reply: pb.CheckCloseResponse = self.stub.CheckClose(
            request, timeout=self._timeout(timeout), metadata=self._metadata
        )
        return reply

    def score_deal(
        self,
        deal: pb.ScoreDealRequest | pb.Deal,
        *,
        rules: pb.RuleOptions | None = None,
        timeout: float | None = None,
    ) -> pb.ScoreDealResponse:
        """The scored deal: a request, or a deal (with ``rules``)."""
        request = deal if isinstance(deal, pb.ScoreDealRequest) else pb.ScoreDealRequest(deal=deal, rules=rules)
        reply: pb.ScoreDealResponse = self.stub.ScoreDeal(
            request, timeout=self._timeout(timeout), metadata=self._metadata
        )
        return reply

    def replay_deal(
        self,
        record: pb.ReplayDealRequest | pb.DealRecord | str,
        *,
        rules: pb.RuleOptions | None = None,
        timeout: float | None = None,
    ) -> pb.ReplayDealResponse:
        """The replay of a deal record: a request, a record (with ``rules``), or a record in the
        notation of docs/records.md (its rule tags, or ``rules`` when given)."""
        request = record if isinstance(record, pb.ReplayDealRequest) else self._replay_request(record, rules)
        reply: pb.ReplayDealResponse = self.stub.ReplayDeal(
            request, timeout=self._timeout(timeout), metadata=self._metadata
        )
        return reply

    def review_deal(
        self,
        record: pb.ReviewDealRequest | pb.DealRecord | str,
        *,
        rules: pb.RuleOptions | None = None,
        timeout: float | None = None,
    ) -> pb.ReviewDealResponse:
        """The review of a deal record, decision by decision (docs/review.md): a request, a record
        (with ``rules``), or a record in the notation of docs/records.md."""
        if isinstance(record, pb.ReviewDealRequest):
            request = record
        else:
            replayed = self._replay_request(record, rules)
            request = pb.ReviewDealRequest(record=replayed.record, rules=replayed.rules)
        reply: pb.ReviewDealResponse = self.stub.ReviewDeal(
            request, timeout=self._timeout(timeout), metadata=self._metadata
        )
        return reply

    def draw_answer(self, question: pb.DrawAnswerRequest, *, timeout: float | None = None) -> list[pb.Drawing]:
        """The pictures of the answer to ``question`` (SVG documents, each with its caption)."""
        reply: pb.DrawAnswerResponse = self.stub.DrawAnswer(
            question, timeout=self._timeout(timeout), metadata=self._metadata
        )
        return list(reply.drawings)

    @staticmethod
    def _replay_request(record: pb.DealRecord | str, rules: pb.RuleOptions | None) -> pb.ReplayDealRequest:
        """A record message (with ``rules``) or a record's notation (its rule tags, or ``rules``
        when given) as a request."""
        if isinstance(record, pb.DealRecord):
            return pb.ReplayDealRequest(record=record, rules=rules)
        from referee.api.records import request_of
        from referee.play.record import parse_notation

        request = request_of(parse_notation(record))
        if rules is not None:
            request.rules.CopyFrom(rules)
        return request

    def check_disputes(
        self,
        cases: Iterable[pb.CheckDisputesRequest],
        *,
        timeout: float | None = None,
        patience: float = 60.0,
        reconnect: float = RECONNECT_SECONDS,
    ) -> Iterator[pb.CheckDisputesResponse]:
        """One verdict per case, in order, each once, over one CheckDisputes stream (more after a
        refusal or a lost connection).

        When the server ends the stream with RESOURCE_EXHAUSTED (a quota, or no room for another
        stream), the cases it did not answer are sent again on a new stream after the wait its
        RetryInfo names (else a short pause, doubled each time); after ``patience`` seconds of
        refusals in a row the error stands. When the stream ends UNAVAILABLE (its connection
        was lost: a dead link or a stopped server found by keepalive, a server gone) or
        CANCELLED by a server that is stopping, they are
        sent again at once (round-robin picks a replica that answers), then after the same
        pauses, for ``reconnect`` seconds without a verdict. ``timeout`` is each stream's deadline.
        """
        feed = _Feed(cases)
        pause = PAUSE_FIRST
        failing_since: float | None = None
        while True:
            replies = self.stub.CheckDisputes(feed.attempt(), timeout=self._timeout(timeout), metadata=self._metadata)
            try:
                for reply in replies:
                    feed.answered()
                    failing_since = None
                    pause = PAUSE_FIRST
                    yield reply
            except grpc.RpcError as error:
                # A stream CANCELLED by a stopping server (not by this client closing) is lost too.
                lost = error.code() == grpc.StatusCode.UNAVAILABLE or (
                    error.code() == grpc.StatusCode.CANCELLED and not self._closed
                )
                if not lost and error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise
                now = time.monotonic()
                first = failing_since is None
                failing_since = now if failing_since is None else failing_since
                if now - failing_since >= (reconnect if lost else patience):
                    raise
                if lost and first:
                    continue  # the channel's other replicas may answer at once
                delay = retry_delay(error)
                if delay is None:
                    delay = pause * random.uniform(0.5, 1.0)
                    pause = min(2 * pause, PAUSE_MAX)
                time.sleep(delay)
                continue
            finally:
                replies.cancel()
            if feed.finished():
                return
            # The stream ended with OK before every case was answered: the server is wrong.
            raise RuntimeError("the server ended a CheckDisputes stream without answering every case")


class _Feed:
    """The cases of a CheckDisputes call, across the streams it takes.

    Each stream takes the cases sent before and not answered, then new ones from the source. A
    stream that has ended takes no more: its request iterator, which gRPC may still be reading
    from another thread, stops at the next case.
    """

    def __init__(self, cases: Iterable[pb.CheckDisputesRequest]) -> None:
        self._source = iter(cases)
        self._unanswered: deque[pb.CheckDisputesRequest] = deque()
        self._exhausted = False
        self._lock = threading.Lock()
        self._generation = 0

    def attempt(self) -> Iterator[pb.CheckDisputesRequest]:
        """The requests of a new stream (the previous one's iterator stops)."""
        with self._lock:
            self._generation += 1
            generation = self._generation
            resend = list(self._unanswered)
        yield from resend
        while True:
            with self._lock:
                if generation != self._generation:
                    return
                case = next(self._source, None)
                if case is None:
                    self._exhausted = True
                    return
                self._unanswered.append(case)
            yield case

    def answered(self) -> None:
        """The oldest unanswered case got its verdict."""
        with self._lock:
            self._unanswered.popleft()

    def finished(self) -> bool:
        """Whether every case was sent and answered."""
        with self._lock:
            return self._exhausted and not self._unanswered


# The first bytes an HTTP/2 client sends: the preface and an empty SETTINGS frame.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes.fromhex("000000040000000000")
PROBE_SECONDS = 3.0


def connection_hint(host: str, port: int, access: dict[str, Any], timeout: float = PROBE_SECONDS) -> str:
    """Why a server at ``host:port`` took no call over the connection ``access`` (``access_from``)
    describes, and the option that fixes it; "" when a probe of the port finds no reason.

    The port is probed the way TLS sees it: a plain-text client at a TLS port, a TLS client at a
    plain-text port, a certificate its CA did not sign, and a server that closes the connection
    once the handshake is done, as one that wants a client certificate (mutual TLS) does.
    """
    wants_tls = bool(access.get("tls") or access.get("tls_ca") is not None or access.get("tls_cert") is not None)
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as error:
        return f"nothing accepts a connection there ({error.strerror or error})"
    with sock:
        # First without checking anything: is it TLS at all?
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.set_alpn_protocols(["h2"])
        try:
            context.wrap_socket(sock, server_hostname=host).close()
        except (ssl.SSLError, OSError):
            if wants_tls:
                return "the port speaks plain text, not TLS: leave out --tls-ca, --tls, --tls-cert and --tls-key"
            return ""
    if not wants_tls:
        return "the port speaks TLS: give the CA that signed its certificate with --tls-ca FILE (or --tls for the system's CAs)"
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.set_alpn_protocols(["h2"])
    if access.get("tls_ca") is not None:
        context.load_verify_locations(cadata=access["tls_ca"].decode("ascii", "replace"))
    else:
        context.load_default_certs()
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as sock,
            context.wrap_socket(sock, server_hostname=host) as tls,
        ):
            tls.sendall(_HTTP2_PREFACE)
            answered = tls.recv(9)
    except ssl.SSLCertVerificationError as error:
        ca = "the CA of --tls-ca" if access.get("tls_ca") is not None else "a CA this system trusts (--tls)"
        return f"the server's certificate was not accepted ({error.verify_message}): is it signed by {ca}, for {host}?"
    except (ssl.SSLError, OSError):
        answered = b""
    if answered:
        return ""
    # The handshake was done, then the server closed the connection: it checks client certificates.
    if access.get("tls_cert") is None:
        return "the server closed the connection after the TLS handshake: it wants a client certificate (mutual TLS): give --tls-cert FILE and --tls-key FILE"
    return "the server closed the connection after the TLS handshake: it did not accept the client certificate of --tls-cert (is it signed by the CA the server trusts?)"


# ``pb``: the contract's messages (``pb.ScoreDealRequest``, ``pb.CheckDisputesRequest``, ...), for
# requests built by hand or parsed from protobuf JSON.
__all__ = ["Referee", "access_from", "add_arguments", "connection_hint", "pb", "retry_delay"]
