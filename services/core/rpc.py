"""The one interceptor every service runs: request id, authentication, role check, the
audit row of a call made in another org, domain errors to `google.rpc.Status`, one log
line per call, and the call's metrics (count by code, unary latency, open streams)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import inspect
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from grpc_status import rpc_status
from prometheus_client import CollectorRegistry

from services.core import audit, auth, context, errors, roles
from services.core.metrics import RpcMetrics, outcome, split_method
from services.core.store import Store, utcnow

log = logging.getLogger(__name__)

# Methods anyone may call: health and reflection answer before any key exists.
_OPEN_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


# The HTTP status and body the gateway answers a REST client with (gateway/render.py).
REST_STATUS = "x-trainyard-http-status"
REST_BODY = "x-trainyard-http-body"


class _Status(
    collections.namedtuple("_Status", ("code", "details", "trailing_metadata")), grpc.Status
):
    """A status to abort with (grpc.Status is an interface without a constructor)."""


class Authenticator:
    """Resolves keys against the store on every call: a key revoked, rotated or expired is
    refused by the next call after its commit, in every process, as no resolution is kept
    (one indexed read by `key_hash`; `bench/auth.py` measures it). Only refusals are
    remembered (`auth.BadKeys`): a key refused stays refused."""

    def __init__(self, store: Store) -> None:
        self._store = store
        # A key just refused is refused again without a lookup on the shared pool.
        self._bad = auth.BadKeys()
        # The `last_used_time` writes under way, by key, held so none is collected
        # unfinished and a key has one at a time.
        self._marking: dict[str, asyncio.Task[None]] = {}

    async def principal(self, metadata: Mapping[str, str]) -> auth.Principal:
        key = auth.bearer(dict(metadata))
        acting = metadata.get("x-org-id") or None
        key_hash = auth.hash_key(key or "")
        if problem := self._bad.problem(key_hash):
            raise auth.refused(problem)

        def lookup() -> auth.Principal:
            with self._store.unit(write=False) as session:
                return auth.authenticate(session, key, acting)

        try:
            found = await asyncio.to_thread(lookup)
        except errors.Unauthenticated as refusal:
            self._bad.add(key_hash, refusal.metadata["problem"])
            raise
        now = utcnow()
        used = found.last_used_time
        stale = used is None or used < now - auth.USED_EVERY
        if stale and found.key_id not in self._marking and len(self._marking) < 64:
            # Off the call's path: a busy store delays the note, never the call.
            task = asyncio.create_task(self._mark_used(found.key_id, now))
            self._marking[found.key_id] = task
            task.add_done_callback(lambda _: self._marking.pop(found.key_id, None))
        return found

    async def _mark_used(self, key_id: str, now: dt.datetime) -> None:
        def write() -> None:
            with self._store.unit() as session:
                auth.mark_used(session, key_id, now)

        try:
            await asyncio.to_thread(write)
        except Exception:
            log.warning("cannot record a key's last use", exc_info=True)

    async def record_outside(self, principal: auth.Principal, method: str) -> None:
        """Put a call made in another org than the key's on the trail before it runs;
        one that cannot be recorded is not made (UNAVAILABLE)."""

        def write() -> None:
            with self._store.unit() as session:
                audit.record(
                    session,
                    "training.org.acted_in",
                    org=principal.org,
                    subject=method,
                    actor=principal.key_id,
                    request_id=context.request_id.get(),
                    key_org=principal.key_org,
                    role=principal.role,
                )

        try:
            await asyncio.to_thread(write)
        except Exception:
            log.exception("cannot record a call in another org")
            raise errors.Unavailable() from None


class Waiting:
    """The calls each key holds open waiting in this process (server streams, long
    polls), at most `limit` at once; the platform's own key is not counted."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: collections.Counter[str] = collections.Counter()

    @contextlib.contextmanager
    def hold(self, waits: bool) -> Iterator[None]:
        who = context.principal_var.get()
        if not waits or who is None or who.is_platform:
            yield
            return
        if self._open[who.key_id] >= self.limit:
            raise errors.ResourceExhausted(
                "This key holds its most waiting calls open; retry later.",
                reason="RATE_LIMITED",
            )
        self._open[who.key_id] += 1
        try:
            yield
        finally:
            self._open[who.key_id] -= 1
            if not self._open[who.key_id]:
                del self._open[who.key_id]


def _waits(request: Any) -> bool:
    """Whether a unary call may wait: its request has a `wait` (a long poll)."""
    descriptor = getattr(request, "DESCRIPTOR", None)
    return descriptor is not None and "wait" in descriptor.fields_by_name


class GatewayInterceptor(grpc.aio.ServerInterceptor):
    """Wraps every handler of a service.

    `roles` maps a method's short name to the roles that may call it (the service's part
    of `roles.TABLE`); a method it does not name is refused to everyone.
    """

    def __init__(
        self,
        authenticator: Authenticator,
        roles: Mapping[str, frozenset[str]],
        metrics: RpcMetrics | None = None,
        *,
        streams_per_key: int = 64,
    ) -> None:
        self._auth = authenticator
        self._roles = roles
        self._metrics = metrics or RpcMetrics(CollectorRegistry())
        self._waiting = Waiting(streams_per_key)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Any],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        method: str = details.method  # type: ignore[attr-defined]
        if handler is None or method.startswith(_OPEN_PREFIXES):
            return handler
        allowed = self._roles.get(method.rsplit("/", 1)[-1], frozenset())
        return _wrap(handler, method, self._auth, allowed, self._metrics, self._waiting)


# A request whose bytes do not parse as its message (the gateway transcoded JSON it could
# not map faithfully): refused as the caller's fault, after the caller's key is checked.
_UNREADABLE = object()


def _lenient(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserialize is None:
        return None

    def read(data: bytes) -> Any:
        try:
            return deserialize(data)
        except DecodeError:
            return _UNREADABLE

    return read


def _check_readable(request: Any) -> None:
    if request is _UNREADABLE:
        raise errors.DomainError(
            "The request body is not a JSON object of the method's shape.",
            reason="MALFORMED_JSON",
        )


def _wrap(
    handler: grpc.RpcMethodHandler,
    method: str,
    authenticator: Authenticator,
    allowed: frozenset[str],
    metrics: RpcMetrics,
    waiting: Waiting,
) -> grpc.RpcMethodHandler:
    service, short = split_method(method)

    async def enter(ctx: grpc.aio.ServicerContext) -> None:
        metadata = {k: v for k, v in ctx.invocation_metadata() or () if isinstance(v, str)}
        context.request_id.set(context.request_id_of(metadata.get("x-request-id")))
        if allowed == roles.TOKEN_HOLDERS:
            return  # the request's token is checked by the method itself
        principal = await authenticator.principal(metadata)
        if principal.role not in allowed:
            raise errors.PermissionDenied(
                "This key's role may not call this method; metadata.roles names those that may.",
                metadata={"roles": ",".join(sorted(allowed))},
            )
        if principal.acts_outside:
            await authenticator.record_outside(principal, method)
        context.principal_var.set(principal)

    async def fail(ctx: grpc.aio.ServicerContext, exc: BaseException) -> None:
        if isinstance(exc, errors.DomainError):
            status = exc.to_status()
        elif isinstance(exc, NotImplementedError):
            status = errors.Unimplemented().to_status()
        else:
            log.exception("unexpected failure in %s", method)
            status = errors.internal_status(context.request_id.get())
        grpc_status = rpc_status.to_status(status)
        # The REST face rides along for the gateway, which answers it to REST clients
        # and drops it for gRPC ones.
        http, body = errors.rest_refusal(status, retry=method.endswith("/RetryJob"))
        rest_face = ((REST_STATUS, str(http)), (REST_BODY, body))
        await ctx.abort_with_status(
            _Status(
                grpc_status.code, grpc_status.details, (*grpc_status.trailing_metadata, *rest_face)
            )
        )

    def done(started: float, exc: BaseException | None, *, timed: bool) -> None:
        code, reason = outcome(exc)
        seconds = time.perf_counter() - started
        metrics.handled.labels(service, short, code, reason).inc()
        if timed:
            metrics.seconds.labels(service, short).observe(seconds)
        who = context.principal_var.get()
        log.info(
            "%s %s %.1fms org=%s",
            method,
            reason or code,
            seconds * 1000,
            who.org if who else "-",
        )

    def aborted(ctx: grpc.aio.ServicerContext) -> None:
        # A handler that aborted by itself: counted by the code it set.
        code = ctx.code()
        name = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
        metrics.handled.labels(service, short, name, "").inc()

    if handler.unary_unary or handler.stream_unary:
        inner = handler.unary_unary or handler.stream_unary

        async def unary(request: Any, ctx: grpc.aio.ServicerContext) -> Any:
            started = time.perf_counter()
            try:
                await enter(ctx)
                _check_readable(request)
                with waiting.hold(_waits(request)):
                    result = inner(request, ctx)
                    if inspect.isawaitable(result):
                        result = await result
            except grpc.aio.AbortError:
                aborted(ctx)
                raise
            except asyncio.CancelledError as exc:
                done(started, exc, timed=True)
                raise
            except Exception as exc:  # every failure leaves as a Status
                done(started, exc, timed=True)
                await fail(ctx, exc)
                raise
            done(started, None, timed=True)
            return result

        factory = (
            grpc.unary_unary_rpc_method_handler
            if handler.unary_unary
            else grpc.stream_unary_rpc_method_handler
        )
        return factory(
            unary,
            request_deserializer=_lenient(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )

    inner_stream = handler.unary_stream or handler.stream_stream

    async def streaming(request: Any, ctx: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        started = time.perf_counter()
        gauge = metrics.streams_open.labels(service, short)
        gauge.inc()
        try:
            await enter(ctx)
            _check_readable(request)
            # A server stream waits; the executors' two-way stream is their wire, not a wait.
            with waiting.hold(handler.unary_stream is not None):
                produced = inner_stream(request, ctx)
                if inspect.isawaitable(produced):
                    produced = await produced
                async for item in produced:
                    yield item
        except grpc.aio.AbortError:
            aborted(ctx)
            raise
        except asyncio.CancelledError as exc:
            done(started, exc, timed=False)
            raise
        except Exception as exc:
            done(started, exc, timed=False)
            await fail(ctx, exc)
            raise
        finally:
            gauge.dec()
        done(started, None, timed=False)

    factory = (
        grpc.unary_stream_rpc_method_handler
        if handler.unary_stream
        else grpc.stream_stream_rpc_method_handler
    )
    return factory(
        streaming,
        request_deserializer=_lenient(handler.request_deserializer),
        response_serializer=handler.response_serializer,
    )
