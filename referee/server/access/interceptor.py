"""The interceptor: who may call (keys), each call's key for the servicer, and throttled failures.

``AccessInterceptor`` lets the health service through and answers every other call without a good
key with UNAUTHENTICATED (one message whatever was wrong). It binds the call's grant (its key, the
key ring to check it again, its quota meter) to the call; the servicer takes a token per call and
per CheckDisputes case (``take_call``), and an empty bucket is RESOURCE_EXHAUSTED with a
``google.rpc.RetryInfo`` saying when to try again.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc
from grpc_health.v1 import health

from referee.server import metrics
from referee.server.access.keys import UNAUTHENTICATED_MESSAGE, ApiKey, KeyRing, bearer_key
from referee.server.access.proxies import TrustedProxies, peer_address
from referee.server.access.quotas import QuotaTable
from referee.server.access.refusals import Refusal, refused
from referee.server.status import KeyRevoked, QuotaExceeded, quota_status

log = logging.getLogger("referee.access")

# The interceptor ----------------------------------------------------------------------------

Behavior = Callable[..., Any]

# Calls without a valid key, per client address: a burst of this many, then this many a second.
# Beyond it a call is RESOURCE_EXHAUSTED before its key is looked at.
FAILED_KEYS_BURST = 100
FAILED_KEYS_PER_SECOND = 10.0
_FAILED_KEYS_ADDRESSES = 4096  # addresses remembered; the one seen least recently is forgotten


class _FailureThrottle:
    """Token buckets of failed authentications, one per client address, in this process."""

    def __init__(self) -> None:
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def wait(self, address: str) -> float:
        """Count one failure of ``address``: 0.0 when it may be answered, else the seconds until it may."""
        now = time.monotonic()
        tokens, last = self._buckets.pop(address, (float(FAILED_KEYS_BURST), now))
        tokens = min(float(FAILED_KEYS_BURST), tokens + (now - last) * FAILED_KEYS_PER_SECOND)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / FAILED_KEYS_PER_SECOND
        self._buckets[address] = (tokens, now)
        if len(self._buckets) > _FAILED_KEYS_ADDRESSES:
            self._buckets.popitem(last=False)
        return wait


class AccessInterceptor(grpc.aio.ServerInterceptor):
    """Keys for every call but the health service's; each call's key and meter for the servicer.

    The interceptor authenticates. The servicer takes the tokens of its own service's calls
    (``take_call``) where the work is, one per unary call and one per CheckDisputes case as it is
    read, so a quota refusal ends a call in the servicer's one place like any other status; a call
    of any other keyed service (reflection) takes its token here, as it starts.
    """

    def __init__(
        self,
        keys: KeyRing | None,
        quotas: QuotaTable | None = None,
        open_services: Sequence[str] = (health.SERVICE_NAME,),
        self_metered: Sequence[str] = (),
        proxies: TrustedProxies | None = None,
    ) -> None:
        self.keys = keys
        self.proxies = proxies or TrustedProxies()
        self.quotas = quotas
        self.open_services = frozenset(open_services)
        self.self_metered = frozenset(self_metered)
        self._failures = _FailureThrottle()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        """The call's handler when its key is good; a handler that refuses it otherwise."""
        method = details.method
        service = method.lstrip("/").partition("/")[0]
        if self.keys is None or service in self.open_services:
            return await continuation(details)
        key = self.keys.find(bearer_key(details.invocation_metadata))
        handler = await continuation(details)
        if key is None:
            return _refusing(handler, self._refuse_unauthenticated(method))
        meter = _Meter(self.quotas, key, method) if self.quotas is not None and key.rate is not None else None
        grant = _Grant(key, self.keys, meter, method)
        _bind(grant)
        if handler is None:
            return handler
        return _with_key(handler, grant, metered_here=service not in self.self_metered)

    def _refuse_unauthenticated(self, method: str) -> Callable[[grpc.aio.ServicerContext], Awaitable[None]]:
        async def refuse(context: grpc.aio.ServicerContext) -> None:
            wait = self._failures.wait(self.proxies.client_address(context.peer(), context.invocation_metadata()))
            if wait > 0:
                metrics.auth_failed("-")
                context.set_trailing_metadata(
                    quota_status(QuotaExceeded("", wait, FAILED_KEYS_MESSAGE)).trailing_metadata
                )
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, FAILED_KEYS_MESSAGE)
            refused(Refusal.UNAUTHENTICATED, "", method)
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE)

        return refuse


FAILED_KEYS_MESSAGE = "too many calls without a valid API key from this address; retry later"


def client_address(peer: str) -> str:
    """The client's address without its port (``ipv4:1.2.3.4:5`` -> ``ipv4:1.2.3.4``)."""
    return peer_address(peer)


class _Meter:
    """Takes tokens from one key's bucket for one call."""

    __slots__ = ("quotas", "key", "method")

    def __init__(self, quotas: QuotaTable, key: ApiKey, method: str) -> None:
        self.quotas = quotas
        self.key = key
        self.method = method

    def take(self) -> None:
        """One token, or QuotaExceeded (recorded as a refusal)."""
        assert self.key.rate is not None
        wait = self.quotas.take(self.key.name, self.key.rate)
        if wait > 0:
            refused(Refusal.QUOTA, self.key.name, self.method)
            raise QuotaExceeded(self.key.name, wait)


class _Grant:
    """What a call's key allows: checked again as the call goes on (the key may be removed)."""

    __slots__ = ("key", "ring", "meter", "method")

    def __init__(self, key: ApiKey, ring: KeyRing, meter: _Meter | None, method: str) -> None:
        self.key = key
        self.ring = ring
        self.meter = meter
        self.method = method

    def check(self) -> None:
        """KeyRevoked when the key is no longer in the key file."""
        if not self.ring.holds(self.key):
            refused(Refusal.UNAUTHENTICATED, self.key.name, self.method)
            raise KeyRevoked(UNAUTHENTICATED_MESSAGE)

    def take(self) -> None:
        """The key still in force, and one token of its bucket."""
        self.check()
        if self.meter is not None:
            self.meter.take()


_current_grant: contextvars.ContextVar[_Grant | None] = contextvars.ContextVar("referee_grant", default=None)


def _bind(grant: _Grant | None) -> None:
    _current_grant.set(grant)


def current_key() -> ApiKey | None:
    """The key the current call came with (None when keys are off)."""
    grant = _current_grant.get()
    return None if grant is None else grant.key


def current_key_name() -> str:
    """The name of the key the current call came with ("" when keys are off or before the check)."""
    grant = _current_grant.get()
    return "" if grant is None else grant.key.name


def take_call() -> None:
    """Count one call (or one CheckDisputes case) against the current call's key: KeyRevoked when
    the key was removed since the call began, QuotaExceeded when its bucket is empty; nothing when
    keys are off."""
    grant = _current_grant.get()
    if grant is not None:
        grant.take()


def check_key() -> None:
    """KeyRevoked when the current call's key was removed since the call began."""
    grant = _current_grant.get()
    if grant is not None:
        grant.check()


_KINDS = {
    (False, False): ("unary_unary", grpc.unary_unary_rpc_method_handler),
    (False, True): ("unary_stream", grpc.unary_stream_rpc_method_handler),
    (True, False): ("stream_unary", grpc.stream_unary_rpc_method_handler),
    (True, True): ("stream_stream", grpc.stream_stream_rpc_method_handler),
}


def _kind(handler: grpc.RpcMethodHandler | None) -> tuple[bool, bool]:
    if handler is None:
        return False, False
    return bool(handler.request_streaming), bool(handler.response_streaming)


def _refusing(
    handler: grpc.RpcMethodHandler | None, refuse: Callable[[grpc.aio.ServicerContext], Awaitable[None]]
) -> grpc.RpcMethodHandler:
    """A handler of the same kind as ``handler`` that ends the call with ``refuse`` before reading it."""

    async def behavior(_request: Any, context: grpc.aio.ServicerContext) -> None:
        await refuse(context)

    return _KINDS[_kind(handler)][1](behavior)  # no deserializer: the request is never read


def _with_key(handler: grpc.RpcMethodHandler, grant: _Grant, metered_here: bool) -> grpc.RpcMethodHandler:
    """``handler`` with the call's grant bound inside it, whatever task it runs in; a token taken
    as the call starts when ``metered_here`` (a service that does not meter its own calls)."""
    attribute, factory = _KINDS[_kind(handler)]
    inner = getattr(handler, attribute)

    async def admitted(context: grpc.aio.ServicerContext) -> bool:
        _bind(grant)
        if metered_here:
            try:
                grant.take()
            except QuotaExceeded as error:
                status = quota_status(error)
                context.set_trailing_metadata(status.trailing_metadata)
                await context.abort(status.code, status.details)
            except KeyRevoked:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE)
        return True

    # The aio server tells a generator of replies from a coroutine by the function itself, so the
    # wrapper is of the same kind as what it wraps; a synchronous handler runs in a thread of its
    # own and is left as it is.
    if inspect.isasyncgenfunction(inner):

        async def replies(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            await admitted(context)
            async for reply in inner(request, context):
                yield reply

        behavior: Behavior = replies
    elif inspect.iscoroutinefunction(inner):

        async def reply(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await admitted(context)
            return await inner(request, context)

        behavior = reply
    else:
        return handler
    return factory(
        behavior, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
    )
