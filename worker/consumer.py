"""Celery's consumer, refusing a message in one log line that never echoes it (Celery logged each as a
traceback repeating its headers and body), the message acknowledged or rejected exactly as Celery does.

A task message is checked before Celery's strategy unpacks it (`task_refusal`): a malformed body or header
ended the worker ("Unrecoverable error"), then every next worker as the message came back; one naming
Celery's own tasks, or asking to run later (held in memory until then), is refused too (docs/pipeline.md).
"""

from __future__ import annotations

import logging
import time
import traceback
from typing import Any

import redis
from celery import signals
from celery.worker.consumer.consumer import Consumer as CeleryConsumer
from kombu.exceptions import ContentDisallowed
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from vine import promise

from pipeline.contract.tasks import GENERATE_TASK_NAME, HELPER_TASK_NAME, SOLVE_TASK_NAME
from worker.broker import say_full
from worker.envelope import count_dropped, reason, validation_reasons

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


EMBED_LINKS = ("callbacks", "errbacks", "chain", "chord")  # what our tasks never carry: no message chains
TASK_NAMES = frozenset({SOLVE_TASK_NAME, GENERATE_TASK_NAME, HELPER_TASK_NAME})  # what our senders send
LATER = ("eta", "countdown", "expires")  # headers that schedule a task: ours run as they arrive


class TaskHeaders(BaseModel):
    """The task message headers Celery reads in the worker's main process, typed as its own senders write
    them (`celery.app.amqp.as_task_v2`): a `stamped_headers` of 5 ended the worker when Celery iterated it."""

    model_config = ConfigDict(strict=True, extra="allow")
    task: str
    id: str = Field(max_length=256)
    shadow: str | None = None
    root_id: str | None = None
    parent_id: str | None = None
    group: str | None = None
    group_index: int | None = None
    groups: list[str] | None = None
    retries: int | None = None
    argsrepr: str | None = None
    kwargsrepr: str | None = None
    origin: str | None = None
    lang: str | None = None
    ignore_result: bool | None = None
    replaced_task_nesting: int | None = None
    stamped_headers: list[str] | None = None
    stamps: dict[str, Any] | None = None
    callbacks: None = None  # in the headers too, they outlive an empty embed: the worker then sent them
    errbacks: None = None
    chain: None = None
    chord: None = None


def _form(value: Any) -> str:
    """What a value is, without its content: `a list of 2`, `a str`, `null`."""
    if value is None:
        return "null"
    size = f" of {len(value)}" if isinstance(value, (list, tuple, dict)) else ""
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}{size}"


def task_refusal(message: Any, known: Any) -> str | None:
    """Why `message` is not a Celery task message (protocol 2) this worker takes, or None; a task name not
    in `known` is left to Celery (it logs the unknown name). The body is decoded here (kombu keeps it for
    Celery); a decode error is raised for the caller to report as Celery would."""
    headers = message.headers
    if not isinstance(headers, dict):
        return f"its headers are {_form(headers)}, not a mapping"
    name = headers.get("task")
    if not isinstance(name, str):
        return f"its task header is {_form(name)} (a Celery task message of protocol 2 names its task)"
    if name not in known:
        return None
    if name not in TASK_NAMES:
        return f"it names task {repr(name)[:80]}, which is Celery's, not one sudoku-batch sends"
    asked = [h for h in LATER if headers.get(h) is not None]
    if asked:
        return f"it asks to run later ({', '.join(asked)}): workers run tasks as they arrive"
    if not isinstance(headers.get("id"), str):
        return f"its id header is {_form(headers.get('id'))}, not a text"
    try:
        TaskHeaders.model_validate(headers)
    except ValidationError as exc:
        return f"its headers are not Celery's ({validation_reasons(exc, 'headers')[:300]})"
    body = message.decode()
    if not isinstance(body, (list, tuple)) or len(body) != 3:
        return f"its body is {_form(body)}, not [args, kwargs, embed]"
    args, kwargs, embed = body
    if not isinstance(args, (list, tuple)) or not isinstance(kwargs, dict):
        return f"its args are {_form(args)} and kwargs {_form(kwargs)}, not a list and a mapping"
    if embed is not None and not isinstance(embed, dict):
        return f"its embed is {_form(embed)}, not a mapping"
    if embed and any(embed.get(k) for k in EMBED_LINKS):
        return "it asks for callbacks, errbacks, a chain or a chord (these tasks take none)"
    return None


class Consumer(CeleryConsumer):
    """The worker's consumer, with one-line logs for refused messages, and patient with a full Redis."""

    def on_connection_error_after_connected(self, exc: BaseException) -> None:
        """Reconnect as Celery does; when Redis refused for want of memory, wait a little first (no busy loop,
        no "frequent restarts" traceback: Celery says why in one line)."""
        if isinstance(exc, redis.OutOfMemoryError):
            say_full(f"the consumer reconnects every {FULL_RETRY_S:g} s until there is room ({_where(exc)})")
            time.sleep(FULL_RETRY_S)
        super().on_connection_error_after_connected(exc)

    def create_task_handler(self, promise: Any = promise) -> Any:
        """Celery's handler of task messages, behind `task_refusal`: a malformed or unwanted message is
        dropped (rejected without requeue, as Celery drops an invalid one) in one log line."""
        handle = super().create_task_handler(promise)

        def on_task_received(message: Any) -> Any:
            try:
                why = task_refusal(message, self.strategies)
            except ContentDisallowed as exc:  # pickle and other serialisers: refused unread, as Celery does
                return self.on_invalid_task(None, message, exc)
            except Exception as exc:  # noqa: BLE001 - decoding a hostile body raises anything; one line each
                return self.on_decode_error(message, exc)
            if why is not None:
                log.error("dropping a task message: %s", why)
                return self._reject(message, "refused")
            return handle(message)

        return on_task_received

    def on_decode_error(self, message: Any, exc: BaseException) -> None:
        log.error("dropping a message that cannot be decoded (%s): %s", message.content_type, reason(exc))
        count_dropped("undecodable")
        message.ack()

    def on_unknown_message(self, body: Any, message: Any) -> None:
        log.error("dropping a message of an unknown format (content type %s)", message.content_type)
        self._reject(message, "unknown_format")

    def on_unknown_task(self, body: Any, message: Any, exc: BaseException) -> None:
        name = repr(str(message.headers.get("task", "")))[:80]  # repr: the sender's text stays on one line
        log.error("dropping a message for an unknown task %s", name)
        self._reject(message, "unknown_task", exc)

    def on_invalid_task(self, body: Any, message: Any, exc: BaseException) -> None:
        log.error("dropping an invalid task message: %s", reason(exc))
        self._reject(message, "invalid", exc)

    def _reject(self, message: Any, why: str, exc: BaseException | None = None) -> None:
        """Count a dropped message under `why`; reject it without requeue, as Celery drops an invalid one."""
        count_dropped(why)
        message.reject_log_error(log, self.connection_errors)
        signals.task_rejected.send(sender=self, message=message, exc=exc)
