"""Kombu's Redis transport, made to survive a full Redis (`maxmemory` with `noeviction`), whose refusal of a
MULTI was an "Unrecoverable error" that ended the worker: an acknowledgement is made without a transaction,
a delivery runs unrecorded, a requeue is left to the orphan sweep, each said in one log line. It also drops,
one line each, a message it should not unpack (`worker.envelope`) before kombu parses or inflates it.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import redis
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

from worker.envelope import bounded_parser, envelope_refusal, raw_refusal, say_dropped

log = logging.getLogger(__name__)
FULL_LOG_S = 60.0  # each kind of "Redis is full" line is logged at most this often per process
_said: dict[str, float] = {}


def say_full(what: str) -> None:
    """Log "Redis is full (maxmemory): <what>", one line, at most once a FULL_LOG_S per process and `what`."""
    now = time.monotonic()
    if now - _said.get(what, -FULL_LOG_S) >= FULL_LOG_S:
        _said[what] = now
        log.warning("Redis is full (maxmemory): %s", what)


class QoS(kombu_redis.QoS):
    """The Redis transport's acknowledgement bookkeeping, going on when Redis is full."""

    def append(self, message: Any, delivery_tag: str) -> None:
        try:
            super().append(message, delivery_tag)
        except redis.OutOfMemoryError:
            say_full("messages run unrecorded (if the worker dies, the collector sends them again)")
            virtual.QoS.append(self, message, delivery_tag)

    def ack(self, delivery_tag: str) -> None:
        try:
            super().ack(delivery_tag)
        except redis.OutOfMemoryError:
            self._forget(delivery_tag)
            virtual.QoS.ack(self, delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        try:
            super().reject(delivery_tag, requeue)
        except redis.OutOfMemoryError:
            if requeue:  # the requeue writes a message back: no room; the orphan sweep requeues it later
                say_full("messages to requeue are left to the orphan sweep")
            else:
                self._forget(delivery_tag)
            virtual.QoS.ack(self, delivery_tag)

    def restore_visible(self, *args: Any, **kwargs: Any) -> None:
        """Requeue messages unacknowledged past the visibility timeout; skipped while Redis is full (its
        mutex is a write), tried again at the next poll."""
        try:
            super().restore_visible(*args, **kwargs)
        except redis.OutOfMemoryError:
            say_full("unacknowledged messages are restored later")

    def _forget(self, delivery_tag: str) -> None:
        """Remove a message's unacknowledged record outside a transaction (Redis takes it when full)."""
        say_full("messages are acknowledged without a transaction")
        with self.channel.conn_or_acquire() as client:
            pipe = client.pipeline(transaction=False)
            pipe.zrem(self.unacked_index_key, delivery_tag)
            pipe.hdel(self.unacked_key, delivery_tag)
            pipe.execute()


def _popped_reply(response: Any, **_: Any) -> tuple[Any, Any] | None:
    """BRPOP's reply `(queue, message)`, or None (as for an empty queue) for a message refused unread."""
    if not response:
        return None
    queue, item = response
    why = raw_refusal(item)
    if why is None:
        return tuple(response)
    say_dropped(queue, why)
    return None


def _rpop_reply(response: Any, **_: Any) -> Any:
    """RPOP's reply (a message), or None for a message refused unread (kombu's `_get`)."""
    why = raw_refusal(response)
    if why is None:
        return response
    say_dropped("(read by RPOP)", why)
    return None


PARSER = bounded_parser()  # the broker connections' reply parser


class Channel(kombu_redis.Channel):
    """A Redis channel with the full-Redis-proof QoS, refusing a message too large or not JSON as it is
    popped (its redis-py clients check BRPOP and RPOP replies before kombu parses them)."""

    QoS = QoS

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        params = super()._connparams(asynchronous)
        if PARSER is not None:  # an oversized message is read past, never held
            params["parser_class"] = PARSER
        return params

    def _create_client(self, asynchronous: bool = False) -> Any:
        client = super()._create_client(asynchronous)
        client.set_response_callback("BRPOP", _popped_reply)
        client.set_response_callback("RPOP", _rpop_reply)
        return client

    def maybe_refresh_binding_expiry(self) -> None:
        """Keep expiring bindings (the remote control's) alive; later, while Redis is full."""
        try:
            super().maybe_refresh_binding_expiry()
        except redis.OutOfMemoryError:
            say_full("binding expiries are refreshed later")


class Transport(kombu_redis.Transport):
    """Kombu's Redis transport with the full-Redis-proof channel (`broker_transport`), delivering only
    well-formed, uncompressed envelopes (`worker.envelope`)."""

    Channel = Channel

    def _deliver(self, message: Any, queue: str) -> None:
        why = envelope_refusal(message)
        if why is not None:  # popped, never recorded as unacknowledged: dropping it acknowledges it
            say_dropped(queue, why)
            return
        super()._deliver(message, queue)
