"""The Celery tasks (solve a chunk, generate one, help escalate one): each message is checked, counted and
run by `pipeline.engine.runner.execute` on a `worker.board.RedisPort`; results go to the job's keys, never
through Celery's result backend.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

import redis
from celery.exceptions import Reject, SoftTimeLimitExceeded
from pydantic import ValidationError

from pipeline.contract.generate import GenerateResult, GenerateTask
from pipeline.contract.tasks import VERSION, ChunkRef, ChunkTask, version_refusal
from pipeline.engine.runner import execute, give_up, settled
from pipeline.escalation.task import HelperTask
from solvers.model.status import Status
from worker.app import app
from worker.board import RedisBoard, RedisPort, job_keys, outbox_task, store_result
from worker.config import settings
from worker.connection import store_client
from worker.envelope import reason, validation_reasons
from worker.heartbeat import CURRENT, chunk_of

log = logging.getLogger(__name__)
TASK_OPTIONS: dict[str, Any] = {  # solve and generate: results go to the job's keys, a lost worker redelivers
    "Request": "worker.requests:SaneLimitsRequest",  # header time limits outside the sane range: ignored
    "ignore_result": True,
    "acks_late": True,
    "reject_on_worker_lost": True,
}
UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)  # Redis away: the message goes back (`requeued`)


def handle(payload: Any, client: Any, kind: type[Any] = ChunkTask) -> int:
    """Run one message of the task `kind` (`pipeline.engine.runner.execute`); the puzzles answered (0: job
    gone, or nothing left to answer; a helper: 1 if it solved its puzzle). A chunk's delivery is counted
    first, so one whose worker died `max_attempts` times is answered `error`, never looped; past the soft
    time limit the rest is answered `timeout`. A helper's is not counted (acknowledged early: not redone)."""
    if kind is HelperTask:
        helper = HelperTask.model_validate(payload)
        # not idle while it helps (the value's word is `race`: read by running fleets)
        with CURRENT.solving(client, f"{helper.job}:{helper.chunk}:race"):
            board = RedisBoard(client, helper.job)
            return execute(helper, RedisPort(client), board, poll_s=settings.stop_poll_s)
    is_ref = kind is ChunkTask and isinstance(payload, dict) and "ref" in payload
    ref = ChunkRef.model_validate(payload) if is_ref else None
    task = None if ref is not None else _validated(payload, client, kind)
    named = ref if ref is not None else task
    if named is None:
        return 0
    job, chunk = named.job, named.chunk
    v = getattr(named, "v", VERSION)  # a solve message's protocol version
    refusal = version_refusal(f"the client of chunk {job}:{chunk}", v, "worker")
    if refusal is not None:
        log.error("refusing a chunk: %s", refusal)
        return 0
    port = RedisPort(client)
    attempts = port.count_delivery(job, chunk)
    if attempts is None:
        return 0  # purged or expired: nobody is waiting for this chunk
    if ref is not None:
        task = outbox_task(client, job_keys(job), ref)
    if task is None:
        return 0
    with CURRENT.solving(client, f"{job}:{chunk}"):  # for the resend sweeps
        start = time.process_time()
        try:
            return execute(
                task,
                port,
                RedisBoard(client, job),
                attempts=attempts,
                max_attempts=settings.max_attempts,
                poll_s=settings.stop_poll_s,
                roots=settings.roots,
            )
        except SoftTimeLimitExceeded:
            why = "the chunk exceeded the worker's time limit"
            with settled(port, task.job):  # what answering the rest costs, after the run's own charge
                return give_up(port, task, why, Status.TIMEOUT, time.process_time() - start, settings.roots)


def _validated(payload: Any, client: Any, kind: type[Any]) -> Any:
    """The task of a message of `kind`; a malformed generate message that still names a chunk of a live job
    is answered with `error` instead of being redelivered (None), any other malformed one is refused."""
    try:
        return kind.model_validate(payload)
    except ValidationError as exc:
        named = chunk_of(payload) if kind is GenerateTask else None
        if named is None:
            raise
        job, _, number = named.rpartition(":")
        chunk = int(number)
        why = f"bad generate request: {validation_reasons(exc)}"
        if RedisPort(client).count_delivery(job, chunk) is None:
            raise  # no live job waits for it: dropped
        store_result(client, GenerateResult.failed(job, chunk, why), settings.job_ttl, keep_answer=True)
        log.error("answering malformed generate message %s:%s with an error: %s", job, chunk, why[:300])
        return None


@contextlib.contextmanager
def requeued() -> Iterator[None]:
    """Put the message back on its queue when Redis cannot be reached (Celery's `Reject` with requeue), not
    Celery's retry: that sends a copy with a countdown (the workers drop such messages), and with the broker
    away the send fails and Celery drops the message for good (issue 31)."""
    try:
        yield
    except UNREACHABLE as exc:
        raise Reject(reason(exc), requeue=True) from None


class BadArguments(ValueError):
    """A task message whose arguments are not the one task (keyword `task`, or alone positionally)."""


def only_task(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The one argument of a message, `task` (BadArguments, one line, for anything else)."""
    if len(args) == 1 and not kwargs:
        return args[0]
    if args or set(kwargs) != {"task"}:  # the names are the sender's text: counted, not echoed
        raise BadArguments(
            f"expected one argument, task; got {len(args)} positional and {len(kwargs)} keyword"
        )
    return kwargs["task"]


def _entry(kind: type[Any], what: str, **options: Any) -> Any:
    """The Celery task `kind.NAME` (`task=` one task of `kind`; see `handle`): whatever a message holds, a
    refusal is one log line that echoes none of it; one acknowledged late is requeued while Redis is away."""

    def run(*args: Any, **kwargs: Any) -> int:
        try:
            with requeued() if options.get("acks_late") else contextlib.nullcontext():
                return handle(only_task(args, kwargs), store_client(), kind)
        except BadArguments as exc:
            log.error("dropping a malformed %s message: %s", what, exc)
        except ValidationError as exc:
            log.error("dropping a malformed %s message: %s", what, validation_reasons(exc)[:500])
        except (ValueError, KeyError, TypeError) as exc:  # an outbox entry that is not a task
            log.error("dropping a %s message: its task or outbox entry is malformed: %s", what, reason(exc))
        except redis.ResponseError as exc:  # WRONGTYPE: a key of the job is not what the pipeline keeps there
            log.error("dropping a %s message whose job keys are not the pipeline's: %s", what, reason(exc))
        return 0

    run.__name__ = run.__qualname__ = f"{what}_task"
    return app.task(name=kind.NAME, **options)(run)


solve_chunk_task = _entry(ChunkTask, "chunk", **TASK_OPTIONS)
generate_chunk_task = _entry(GenerateTask, "generate", **TASK_OPTIONS)
helper_task = _entry(HelperTask, "helper", ignore_result=True, acks_late=False)  # killed: not redone
