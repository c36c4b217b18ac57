"""What a message on the workers' queue must be before kombu unpacks it: small, JSON, a kombu envelope,
uncompressed; anything else is dropped with one log line naming the queue and the reason, never the content.

Kombu parses, base64-decodes and inflates a popped message in the worker's main process before Celery sees
it: a hand-made one ended the worker or grew it by gigabytes (measured in docs/pipeline.md). So the size comes
first: the reply parser (`Bounded`) reads a reply over `MAX_MESSAGE_BYTES` past, keeping only its size
(`Oversized`); then it must be JSON, of kombu's form (`Envelope`), uncompressed. A message refused here was
popped and never recorded as unacknowledged: dropping it acknowledges it.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from typing import Any

import redis
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.contract.keys import DROP_REASONS, dropped_key
from pipeline.contract.tasks import MAX_TASK_CHARS
from worker.config import settings
from worker.connection import store_client

log = logging.getLogger(__name__)
# the largest message a sender of ours can make: a whole ChunkTask at its bounds (puzzle text JSON-escaped
# twice over, runs and spans ~1 MB), base64'd (4/3), with headers; ChunkRefs (what clients send) are ~1 KB
MAX_MESSAGE_BYTES = 4 * (2 * MAX_TASK_CHARS + (2 << 20)) // 3 + (1 << 20)
MAX_TAG_CHARS = 256  # a delivery tag (kombu's are uuid4 texts, 36 characters)
SKIP_BYTES = 1 << 20  # an oversized reply is read past in pieces of this size

try:  # redis-py's reply parsers (a private module): without them, oversized replies are read, then refused
    from redis._parsers.resp2 import _RESP2Parser
    from redis._parsers.resp3 import _RESP3Parser
    from redis._parsers.socket import SocketBuffer
    from redis.utils import DEFAULT_RESP_VERSION
except ImportError:  # pragma: no cover - another redis-py layout
    _RESP2Parser = _RESP3Parser = SocketBuffer = None  # type: ignore[assignment,misc]
    DEFAULT_RESP_VERSION = 2


class Oversized:
    """A reply read past unkept because it was over `MAX_MESSAGE_BYTES`: only its size is known."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


class Bounded:
    """A redis-py reply parser (mixed in before it) returning `Oversized` for a value over
    `MAX_MESSAGE_BYTES` instead of reading it into memory."""

    _buffer: Any
    _sock: Any

    def _read_response(self, *args: Any, **kwargs: Any) -> Any:
        buffer = self._buffer
        if SocketBuffer is None or not isinstance(buffer, SocketBuffer):
            return super()._read_response(*args, **kwargs)  # type: ignore[misc]
        start = buffer.get_pos()
        head = buffer.readline(**({"timeout": kwargs["timeout"]} if "timeout" in kwargs else {}))
        if head[:1] == b"$" and head[1:].isdigit() and int(head[1:]) > MAX_MESSAGE_BYTES:
            self._skip(int(head[1:]) + 2)  # the value and its CRLF
            return Oversized(int(head[1:]))
        buffer.rewind(start)  # anything else: redis-py's own reading, from the same place
        return super()._read_response(*args, **kwargs)  # type: ignore[misc]

    def _skip(self, size: int) -> None:
        """Consume `size` bytes of the reply (what is buffered, then the socket) without keeping them."""
        buffered = self._buffer._buffer.read(size)  # past the header: one socket read at most
        left = size - len(buffered)
        scratch = memoryview(bytearray(min(left, SKIP_BYTES)))
        while left:
            got = self._sock.recv_into(scratch, min(left, SKIP_BYTES))
            if got == 0:
                raise redis.ConnectionError("the connection closed in the middle of an oversized message")
            left -= got


def bounded_parser() -> type | None:
    """The reply parser class for the broker's connections (RESP2 or 3, as redis-py speaks by default),
    or None when redis-py's parsers are not where this module looks."""
    base = _RESP3Parser if DEFAULT_RESP_VERSION == 3 else _RESP2Parser
    return (
        None if base is None else type(f"Bounded{base.__name__}", (Bounded, base), {"__module__": __name__})
    )


class DeliveryInfo(BaseModel):
    """Where kombu says a message was published (its QoS reads both to requeue it)."""

    model_config = ConfigDict(strict=True, extra="allow")
    exchange: str
    routing_key: str


class Properties(BaseModel):
    """The envelope's properties kombu reads before any of our code runs."""

    model_config = ConfigDict(strict=True, extra="allow")
    delivery_tag: str = Field(min_length=1, max_length=MAX_TAG_CHARS)
    body_encoding: str = Field(pattern="^base64$")  # what kombu's Redis transport always writes
    delivery_info: DeliveryInfo
    priority: int | None = Field(default=None, ge=0, le=255)


class Envelope(BaseModel):
    """A kombu message as the Redis transport stores it (`{"body", "properties", "headers", ...}`)."""

    model_config = ConfigDict(strict=True, extra="allow", populate_by_name=True)
    body: str | None = None
    properties: Properties
    headers: dict[str, Any] | None = None
    content_type: str | None = Field(default=None, alias="content-type")
    content_encoding: str | None = Field(default=None, alias="content-encoding")


def raw_refusal(item: Any) -> str | None:
    """Why a message popped from a queue is refused before kombu parses it, or None (take it)."""
    if not isinstance(item, (bytes, str, Oversized)):
        return None  # not a message: kombu's own path decides
    if len(item) > MAX_MESSAGE_BYTES:
        return f"{len(item)} bytes, over {MAX_MESSAGE_BYTES} (the largest message a sender of ours makes)"
    try:
        json.loads(item)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        return f"not a JSON envelope ({type(exc).__name__})"
    return None


def validation_reasons(exc: ValidationError, whole: str = "message") -> str:
    """A pydantic error as `field: reason; ...` on one line (`whole` for the input as a whole), without the
    input values (no payload echoed)."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or whole}: {e['msg']}" for e in exc.errors())


def envelope_refusal(message: Any) -> str | None:
    """Why a parsed envelope is refused before kombu builds a message of it, or None (take it)."""
    try:
        envelope = Envelope.model_validate(message)
    except ValidationError as exc:
        return f"not a kombu envelope ({validation_reasons(exc, 'envelope')[:300]})"
    compression = (envelope.headers or {}).get("compression")
    if compression is not None:
        return f"compressed ({repr(compression)[:60]}): workers take uncompressed messages only"
    if envelope.body:
        try:
            base64.b64decode(envelope.body, validate=True)
        except (binascii.Error, ValueError):
            return "its body is not base64"
    return None


def say_dropped(queue: Any, why: str) -> None:
    """Log the one line of a message dropped unread, and count it (`unreadable`)."""
    name = queue.decode(errors="replace") if isinstance(queue, bytes) else str(queue)
    log.error("dropping a message from queue %s: %s", repr(name)[:80], why)
    count_dropped("unreadable")


def count_dropped(why: str) -> None:
    """Count one dropped message under `why` (one of `DROP_REASONS`: a bounded set of fields) in the fleet's
    hash that `/metrics` exports; a Redis away or full loses the count, never the worker (one line)."""
    if why not in DROP_REASONS:  # our callers' own names: a new one must be declared there first
        raise ValueError(f"{why!r} is not one of {DROP_REASONS}")
    try:
        store_client().hincrby(dropped_key(settings.key_prefix), why, 1)
    except redis.RedisError as exc:
        log.warning("a dropped message was not counted: %s", reason(exc))


def reason(exc: BaseException | None) -> str:
    """An exception as one short line: its type and the first line of its message."""
    if exc is None:
        return "no reason given"
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]
