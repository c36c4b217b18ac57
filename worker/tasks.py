"""The Celery tasks (solve a chunk, generate one, help escalate one): each message is checked, counted and
run by `pipeline.engine.runner.execute` on a `RedisPort`, the job's keys in Redis.

Results never go through Celery's result backend: a solve chunk publishes its parts under the
job, each refused whose rows are answered already (a redelivered chunk solves only the rest); a
generate chunk's failure answer (attempt or time limit) is written only where none is stored yet.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Iterator
from typing import Any

import redis
from celery.exceptions import Reject, SoftTimeLimitExceeded
from pydantic import ValidationError

from pipeline.contract.generate import GenerateResult, GenerateTask
from pipeline.contract.keys import (
    Frontier,
    JobKeys,
    job_stopped,
    part_commands,
    published_rows,
    result_commands,
    split_count,
)
from pipeline.contract.outbox import read_outbox_entry
from pipeline.contract.part import Part
from pipeline.contract.runs import overlaps
from pipeline.contract.tasks import (
    JOB_ID_PATTERN,
    MAX_TASK_CHARS,
    VERSION,
    ChunkRef,
    ChunkTask,
    version_refusal,
)
from pipeline.engine.runner import execute, give_up
from pipeline.engine.solve import worker_name
from pipeline.escalation.task import HelperTask
from solvers.model.result import Status
from worker.app import app
from worker.board import RedisBoard
from worker.broker import say_full
from worker.config import settings
from worker.connection import store_client
from worker.heartbeat import CURRENT

log = logging.getLogger(__name__)
TASK_OPTIONS: dict[str, Any] = {  # solve and generate: results go to the job's keys, a lost worker redelivers
    "Request": "worker.requests:SaneLimitsRequest",  # header time limits outside the sane range: ignored
    "ignore_result": True,
    "acks_late": True,
    "reject_on_worker_lost": True,
}
UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)  # Redis away: the message goes back (`requeued`)
MAX_ENTRY_BYTES = 2 * MAX_TASK_CHARS + (1 << 20)  # an outbox entry: the task's JSON (escapes included)


ANSWER_ONCE_TRIES = 50  # compare-and-set rounds for a failure answer before it is written regardless
ROOM_POLL_S = 1.0  # seconds between writes tried while Redis is full


def store_result(client: Any, result: Part | GenerateResult, ttl: int, keep_answer: bool = False) -> bool:
    """Write a chunk result with the shared idempotent commands, in one transaction; False if not written.

    Nothing is written for a job stopped or gone (`write_unless_stopped`). `keep_answer`
    (failure answers: attempt or time limit) writes only if the chunk has no answer yet,
    so a chunk that finished and was delivered again keeps its good result.
    """
    stats = result.header.stats
    keys = JobKeys(result.header.job, settings.key_prefix)
    commands = result_commands(
        keys, result.header.chunk, result.encode(), stats.model_dump_json(), stats.n, stats.cpu_s, ttl
    )
    return write_unless_stopped(client, keys, commands, result.header.chunk if keep_answer else None)


def write_unless_stopped(
    client: Any, keys: JobKeys, commands: list[tuple[Any, ...]], unanswered: int | None = None
) -> list[Any] | None:
    """Run `commands` in one MULTI/EXEC unless the job is stopped or gone (`job_stopped`), or, with
    `unanswered`, that chunk has an answer already (its stats field); their replies, or None.

    The checks and the write are one step: WATCH of the stop key (a purge sets it before
    deleting anything) and of the stats hash makes a change in between abort the EXEC,
    and the next round sees it. Other chunks' results landing in the stats hash retry the
    round; after ANSWER_ONCE_TRIES busy rounds the answer check is dropped (an answer,
    even a failure, beats a chunk never answered) but never the stop check. A full Redis
    (`maxmemory`, `noeviction`) is waited out: one log line, a try every ROOM_POLL_S.
    """
    busy = 0
    while busy <= ANSWER_ONCE_TRIES:
        check = unanswered if busy < ANSWER_ONCE_TRIES else None
        with client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(keys.stop, *([keys.stats] if check is not None else []))
                if job_stopped(pipe, keys):
                    return None
                if check is not None and pipe.hexists(keys.stats, check):
                    return None
                pipe.multi()
                for command in commands:
                    pipe.execute_command(*command)
                replies = list(pipe.execute())
            except redis.WatchError:
                busy += 1
                continue
            except redis.OutOfMemoryError:
                say_full(f"results wait for room (a try every {ROOM_POLL_S:g} s)")
                time.sleep(ROOM_POLL_S)
                continue
        return replies
    return None  # the stop key kept changing: a purge is under way


class RedisPort:
    """Where a worker's chunk run meets its job (`pipeline.engine.runner.ChunkPort`): the job's keys in
    Redis."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def count_delivery(self, job: str, chunk: int) -> int | None:
        return count_delivery(self.client, JobKeys(job, settings.key_prefix), chunk)

    def answered(self, job: str, chunk: int) -> list[tuple[int, int]] | None:
        return published_rows(self.client.hgetall(JobKeys(job, settings.key_prefix).parts(chunk)))

    def publish(self, part: Part) -> bool:
        return publish_part(self.client, part, settings.job_ttl)

    def stopped(self, job: str) -> bool:
        return job_stopped(self.client, JobKeys(job, settings.key_prefix))

    def fail_job(self, job: str, reason: str) -> None:
        keys = JobKeys(job, settings.key_prefix)
        log.error("job %s failed: %s", job, reason)
        write_unless_stopped(
            self.client, keys, [("HSET", keys.meta, "state", "failed", "error", reason[:500])]
        )

    def publish_generated(self, result: GenerateResult) -> None:
        store_result(self.client, result, settings.job_ttl, keep_answer=result.error is not None)

    def split_read(self, job: str, chunk: int, input_no: int, lines: int, entries: int) -> None:
        """Record a split's counts, then move the job's frontier over every split counted by now."""
        keys = JobKeys(job, settings.key_prefix)
        counts = f"{input_no} {lines} {entries}"
        write_unless_stopped(
            self.client,
            keys,
            [("HSET", keys.counts, chunk, counts), ("EXPIRE", keys.counts, settings.job_ttl)],
        )
        advance_frontier(self.client, keys, settings.job_ttl)

    def split_offsets(self, job: str, chunk: int) -> tuple[int, int] | None:
        raw = self.client.hget(JobKeys(job, settings.key_prefix).offsets, chunk)
        if raw is None:
            return None
        line, index = (int(x) for x in raw.split())
        return line, index

    def count_frontier(self, job: str) -> bool:
        """Count the first split nobody has counted (its worker is slow, dead, or its message queued behind
        this one) from its outbox task; False when there is none to count."""
        from pipeline.engine.splits import read_split

        keys = JobKeys(job, settings.key_prefix)
        front = Frontier.parse(self.client.get(keys.frontier))
        if self.client.hexists(keys.counts, front.chunk):  # counted meanwhile: move on
            advance_frontier(self.client, keys, settings.job_ttl)
            return True
        task = outbox_task(self.client, keys, ChunkRef(job=job, chunk=front.chunk))
        if task is None or task.split is None:
            return False
        refuse_outside_roots(self, task)
        read = read_split(task)
        log.info("counted split %s:%s for the splits after it (its own worker is late)", job, front.chunk)
        self.split_read(job, task.chunk, task.split.input, read.lines, read.entries)
        return True


def refuse_outside_roots(port: RedisPort, task: ChunkTask) -> None:
    """Fail the job in one line and stop waiting on it (JobStopped) when a split counted for the splits after
    it lies outside this worker's data roots: it is not opened."""
    from pipeline.engine.dataset import JobStopped, check_roots
    from pipeline.engine.roots import OutsideRoots

    try:
        check_roots(task, settings.roots)
    except OutsideRoots as exc:
        port.fail_job(task.job, f"worker {worker_name()} {exc}")
        raise JobStopped(f"job {task.job} failed: a split outside the data roots") from None


FRONTIER_BATCH = 256  # splits' counts read per round when the frontier moves


def advance_frontier(client: Any, keys: JobKeys, ttl: int) -> None:
    """Move the job's split frontier over every split counted (`pipeline.contract.keys.Frontier`), writing the
    offsets of each split passed; a compare-and-set on the frontier (two workers moving it at once: the
    later one goes again from where the first left it)."""
    while True:
        with client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(keys.frontier, keys.stop)
                if job_stopped(pipe, keys):
                    return
                front = Frontier.parse(pipe.get(keys.frontier))
                fields = list(range(front.chunk, front.chunk + FRONTIER_BATCH))
                passed = front.advance([split_count(v) for v in pipe.hmget(keys.counts, fields)])
                if not passed:
                    return
                pipe.multi()
                pipe.hset(keys.offsets, mapping={c: f"{line} {index}" for c, line, index in passed})
                pipe.hdel(keys.counts, *[c for c, _, _ in passed])
                pipe.set(keys.frontier, front.text(), ex=ttl)
                pipe.expire(keys.offsets, ttl)
                pipe.execute()
            except redis.WatchError:
                continue
        if len(passed) < FRONTIER_BATCH:
            return


def publish_part(client: Any, part: Part, ttl: int) -> bool:
    """Publish one part of a solve chunk unless the job is stopped or gone, or any of its rows is answered
    already (a chunk delivered twice at once); True when written.

    The checks and the write are one step: WATCH of the stop key and of the chunk's parts hash
    makes a change in between abort the EXEC, and the next round sees it. A full Redis
    (`maxmemory`, `noeviction`) is waited out: one log line, a try every ROOM_POLL_S.
    """
    head = part.header
    keys = JobKeys(head.job, settings.key_prefix)
    payload = part.encode()
    stats = head.stats
    while True:
        with client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(keys.stop, keys.parts(head.chunk))
                if job_stopped(pipe, keys):
                    return False
                published = published_rows(pipe.hgetall(keys.parts(head.chunk)))
                if published is None or overlaps(part.row_runs(), published):
                    return False  # answered already: every row keeps its first record
                complete = sum(c for _, c in published) + len(part) >= stats.chunk_n
                pipe.multi()
                commands = part_commands(
                    keys, head.chunk, head.row, payload, stats.model_dump_json(), stats.n, stats.cpu_s, ttl,
                    complete, part.row_runs(),
                )  # fmt: skip
                for command in commands:
                    pipe.execute_command(*command)
                pipe.execute()
                return True
            except redis.WatchError:
                continue
            except redis.OutOfMemoryError:
                say_full(f"results wait for room (a try every {ROOM_POLL_S:g} s)")
                time.sleep(ROOM_POLL_S)


def handle(payload: Any, client: Any, kind: type[Any] = ChunkTask) -> int:
    """Run one message of the task `kind` (`pipeline.engine.runner.execute`); the puzzles answered (0: job
    gone, or nothing left to answer; a helper: 1 if it solved its puzzle).

    A solve message is a ChunkRef (the task is read from the outbox) or a whole task; one of another
    protocol version is refused in one log line naming both. The delivery of a chunk is counted first:
    one whose worker died `max_attempts` times is answered with `error` instead of being tried forever.
    Past Celery's soft time limit, what is unanswered is answered `timeout` (`give_up`). A helper's
    message is not counted (acknowledged early: a killed helper is not redelivered).
    """
    if kind is HelperTask:
        helper = HelperTask.model_validate(payload)
        with CURRENT.solving(
            client, f"{helper.job}:{helper.chunk}:race"
        ):  # not idle while it helps (the value's word is `race`: read by running fleets)
            board = RedisBoard(client, helper.job)
            return execute(helper, RedisPort(client), board, poll_s=settings.stop_poll_s)
    ref = ChunkRef.model_validate(payload) if kind is ChunkTask and "ref" in _dict(payload) else None
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
        task = outbox_task(client, JobKeys(job, settings.key_prefix), ref)
    if task is None:
        return 0
    with CURRENT.solving(client, f"{job}:{chunk}"):  # for the resend sweeps
        start = time.process_time()
        try:
            return execute(
                task, port, RedisBoard(client, job), attempts=attempts, max_attempts=settings.max_attempts,
                poll_s=settings.stop_poll_s, roots=settings.roots,
            )  # fmt: skip
        except SoftTimeLimitExceeded:
            reason = "the chunk exceeded the worker's time limit"
            return give_up(port, task, reason, Status.TIMEOUT, time.process_time() - start, settings.roots)


def _dict(payload: Any) -> dict[str, Any]:
    return payload if isinstance(payload, dict) else {}


def _validated(payload: Any, client: Any, kind: type[Any]) -> Any:
    """The task of a message of `kind`; a malformed generate message that still names a chunk of a live job
    is answered with `error` instead of being redelivered (None), any other malformed one is refused."""
    try:
        return kind.model_validate(payload)
    except ValidationError as exc:
        named = _named_chunk(payload) if kind is GenerateTask else None
        if named is None:
            raise
        job, chunk = named
        reason = f"bad generate request: {validation_reasons(exc)}"
        if count_delivery(client, JobKeys(job, settings.key_prefix), chunk) is None:
            raise  # no live job waits for it: dropped
        store_result(client, GenerateResult.failed(job, chunk, reason), settings.job_ttl, keep_answer=True)
        log.error("answering malformed generate message %s:%s with an error: %s", job, chunk, reason[:300])
        return None


def count_delivery(client: Any, keys: JobKeys, chunk: int) -> int | None:
    """Count one more delivery of `chunk` and return the count; None when the job is stopped or gone."""
    replies = write_unless_stopped(
        client, keys, [("HINCRBY", keys.attempts, chunk, 1), ("EXPIRE", keys.attempts, settings.job_ttl)]
    )
    return None if replies is None else int(replies[0])


def outbox_task(client: Any, keys: JobKeys, ref: ChunkRef) -> ChunkTask | None:
    """The task a ChunkRef names, from the job's outbox; None when the chunk is answered already.

    The result's MULTI drops the outbox entry, so a missing entry means a redelivery of a
    chunk that has its answer (or a job being purged): nothing to solve.
    """
    size = int(client.hstrlen(keys.outbox, str(ref.chunk)))
    if size > MAX_ENTRY_BYTES:  # checked before reading: a hand-made entry cannot make us allocate it
        raise ValueError(f"outbox entry {ref.job}:{ref.chunk} is {size} bytes, over {MAX_ENTRY_BYTES}")
    entry = client.hget(keys.outbox, str(ref.chunk)) if size else None
    if entry is None:
        if not client.hexists(keys.parts(ref.chunk), "done"):
            log.warning("chunk %s:%s is neither in the outbox nor answered; dropped", ref.job, ref.chunk)
        return None
    task = ChunkTask.model_validate_json(read_outbox_entry(entry)[1])
    if (task.job, task.chunk) != (ref.job, ref.chunk):
        raise ValueError(f"outbox entry {ref.job}:{ref.chunk} holds chunk {task.job}:{task.chunk}")
    return task


@contextlib.contextmanager
def requeued() -> Iterator[None]:
    """Put the message back on its queue when Redis cannot be reached (Celery's `Reject` with requeue).

    Not Celery's retry: it sends a copy with a countdown (the workers drop such messages,
    `worker.consumer`), and when the broker is away that send fails and Celery rejects the
    message without requeue (it was gone for good: issue 31). A requeue Redis cannot take now
    leaves the message unacknowledged for the orphan sweep (`worker.heartbeat`); each delivery
    is counted, so a chunk that keeps meeting this is answered `error` after `max_attempts`.
    """
    try:
        yield
    except UNREACHABLE as exc:
        raise Reject(one_line(exc), requeue=True) from None


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


def validation_reasons(exc: ValidationError) -> str:
    """A pydantic error as `field: reason; ...` on one line, without the input values (no payload echoed)."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'message'}: {e['msg']}" for e in exc.errors())


def one_line(exc: BaseException) -> str:
    """An exception as one short line: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _named_chunk(payload: Any) -> tuple[str, int] | None:
    """(job, chunk) of a message that names them well, however wrong the rest; None otherwise."""
    if not isinstance(payload, dict):
        return None
    job, chunk = payload.get("job"), payload.get("chunk")
    if isinstance(job, str) and re.match(JOB_ID_PATTERN, job) and type(chunk) is int and 0 <= chunk < 2**53:
        return job, chunk
    return None


def _entry(kind: type[Any], what: str, **options: Any) -> Any:
    """The Celery task `kind.NAME` (`task=` one task of `kind`; see `handle`).

    Whatever a message holds, a refusal is one log line that echoes none of it: other arguments,
    a malformed task, an outbox entry that is not a task, a key of the job of the wrong type. A
    message acknowledged late goes back to its queue when Redis cannot be reached (`requeued`).
    """

    def run(*args: Any, **kwargs: Any) -> int:
        try:
            with requeued() if options.get("acks_late") else contextlib.nullcontext():
                return handle(only_task(args, kwargs), store_client(), kind)
        except BadArguments as exc:
            log.error("dropping a malformed %s message: %s", what, exc)
        except ValidationError as exc:
            log.error("dropping a malformed %s message: %s", what, validation_reasons(exc)[:500])
        except (ValueError, KeyError, TypeError) as exc:  # an outbox entry that is not a task
            log.error("dropping a %s message: its task or outbox entry is malformed: %s", what, one_line(exc))
        except redis.ResponseError as exc:  # WRONGTYPE: a key of the job is not what the pipeline keeps there
            log.error("dropping a %s message whose job keys are not the pipeline's: %s", what, one_line(exc))
        return 0

    run.__name__ = run.__qualname__ = f"{what}_task"
    return app.task(name=kind.NAME, **options)(run)


solve_chunk_task = _entry(ChunkTask, "chunk", **TASK_OPTIONS)
generate_chunk_task = _entry(GenerateTask, "generate", **TASK_OPTIONS)
helper_task = _entry(HelperTask, "helper", ignore_result=True, acks_late=False)  # killed: not redone
