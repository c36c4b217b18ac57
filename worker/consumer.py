"""Celery's consumer, logging a message it refuses in one line, without echoing the message.

Celery logs a message it cannot decode (pickle and other serialisers refused: JSON only),
one for an unknown task, and one of an invalid form as tracebacks that repeat its
headers and body (a 27-line log record for one pickle message). A refused message is
expected here (docs/security.md): one line names what was refused and why, and the
message is acknowledged or rejected exactly as Celery does. A consumer restarted because
Redis refused a command for want of memory (`broker_channel_error_retry`) waits
FULL_RETRY_S first. Set as `worker_consumer`.
"""

from __future__ import annotations

import logging
import time
import traceback
from typing import Any

import redis
from celery import signals
from celery.worker.consumer.consumer import Consumer as CeleryConsumer

from worker.broker import say_full

log = logging.getLogger(__name__)
FULL_RETRY_S = 2.0  # seconds between reconnections while Redis is full


def _where(exc: BaseException) -> str:
    """The innermost frame of kombu or Celery that met `exc`, as `module:line function` (a diagnosis)."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/kombu/" in f.filename or "/celery/" in f.filename] or frames
    if not ours:
        return "?"
    frame = ours[-1]
    return f"{frame.filename.rsplit('/', 2)[-1]}:{frame.lineno} {frame.name}"


def reason(exc: BaseException | None) -> str:
    """An exception as one short line: its type and the first line of its message."""
    if exc is None:
        return "no reason given"
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


class Consumer(CeleryConsumer):
    """The worker's consumer, with one-line logs for refused messages, and patient with a full Redis."""

    def on_connection_error_after_connected(self, exc: BaseException) -> None:
        """Reconnect as Celery does; when Redis refused for want of memory, wait a little first (no busy loop,
        no "frequent restarts" traceback: Celery says why in one line)."""
        if isinstance(exc, redis.OutOfMemoryError):
            say_full(f"the consumer reconnects every {FULL_RETRY_S:g} s until there is room ({_where(exc)})")
            time.sleep(FULL_RETRY_S)
        super().on_connection_error_after_connected(exc)

    def on_decode_error(self, message: Any, exc: BaseException) -> None:
        log.error("dropping a message that cannot be decoded (%s): %s", message.content_type, reason(exc))
        message.ack()

    def on_unknown_message(self, body: Any, message: Any) -> None:
        log.error("dropping a message of an unknown format (content type %s)", message.content_type)
        message.reject_log_error(log, self.connection_errors)
        signals.task_rejected.send(sender=self, message=message, exc=None)

    def on_unknown_task(self, body: Any, message: Any, exc: BaseException) -> None:
        name = repr(str(message.headers.get("task", "")))[:80]  # repr: the sender's text stays on one line
        log.error("dropping a message for an unknown task %s", name)
        message.reject_log_error(log, self.connection_errors)
        signals.task_rejected.send(sender=self, message=message, exc=exc)

    def on_invalid_task(self, body: Any, message: Any, exc: BaseException) -> None:
        log.error("dropping an invalid task message: %s", reason(exc))
        message.reject_log_error(log, self.connection_errors)
        signals.task_rejected.send(sender=self, message=message, exc=exc)
