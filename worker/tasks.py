"""The tasks: solve a chunk with `solvers.chunk.solve_chunk`, or generate one with
`solvers.generator.generate_chunk`, and store its result in Redis.

Results never go through Celery's result backend: the task writes the chunk's result
under the job with the shared idempotent write (`solvers.chunk_store.result_commands`),
so a chunk redelivered after a crash overwrites its first answer instead of adding one;
a failure answer (attempt or time limit) is written only where no answer is stored yet.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import re
import threading
import time
from typing import Any

import redis
from celery.exceptions import SoftTimeLimitExceeded
from pydantic import ValidationError

from solvers.chunk import (
    JOB_ID_PATTERN,
    MAX_TASK_CHARS,
    TASK_NAME,
    ChunkRef,
    ChunkResult,
    ChunkTask,
    failed_chunk,
    read_outbox_entry,
    solve_chunk,
    worker_name,
)
from solvers.chunk_store import JobKeys, current_key, job_stopped, result_commands, workers_key
from solvers.generate_task import GENERATE_TASK_NAME, GenerateTask
from solvers.generator import generate_chunk, render_lines
from solvers.result import Status
from solvers.stop import StopPoller
from worker.app import app, settings
from worker.broker import say_full

log = logging.getLogger(__name__)
TASK_OPTIONS: dict[str, Any] = {  # both tasks: results go to the job's keys, a lost worker redelivers
    "Request": "worker.requests:SaneLimitsRequest",  # header time limits outside the sane range: ignored
    "ignore_result": True,
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": (redis.ConnectionError, redis.TimeoutError),
    "retry_backoff": True,
    "retry_backoff_max": 60,
    "max_retries": 20,
}
MAX_ENTRY_BYTES = 2 * MAX_TASK_CHARS + (1 << 20)  # an outbox entry: the task's JSON (escapes included)
_client: tuple[int, redis.Redis] | None = None
_beat_started = False


def store_client() -> redis.Redis:
    """This process's Redis connection (made after fork, never shared across processes)."""
    global _client
    if _client is None or _client[0] != os.getpid():
        client = redis.Redis.from_url(
            settings.broker,
            socket_connect_timeout=settings.connect_timeout,
            socket_timeout=settings.socket_timeout,
        )
        _client = (os.getpid(), client)
    return _client[1]


ANSWER_ONCE_TRIES = 50  # compare-and-set rounds for a failure answer before it is written regardless
ROOM_POLL_S = 1.0  # seconds between writes tried while Redis is full


def store_result(client: Any, result: ChunkResult, ttl: int, keep_answer: bool = False) -> bool:
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


def handle(payload: dict[str, Any], client: Any) -> int:
    """Solve one chunk message and store its answer; return the puzzles answered (0: job gone, or answered).

    Each delivery is counted before the chunk runs: a chunk whose worker died
    `max_attempts` times is answered with `error` results instead of being tried forever,
    unless it has an answer already (a delivery after it finished): a good result is never
    replaced by a failure (attempt or time limit). While it is solved, a poller checks the
    job's stop key; a purged job stops at the solvers' next slice and nothing is written.
    """
    ref: ChunkRef | None = None
    task: ChunkTask | None = None
    if isinstance(payload, dict) and "ref" in payload:  # a ChunkRef (what clients send): task in the outbox
        ref = ChunkRef.model_validate(payload)
        job, chunk = ref.job, ref.chunk
    else:  # the whole task in the message
        task = ChunkTask.model_validate(payload)
        job, chunk = task.job, task.chunk
    keys = JobKeys(job, settings.key_prefix)
    attempts = count_delivery(client, keys, chunk)
    if attempts is None:
        return 0  # purged or expired: nobody is waiting for this chunk
    if ref is not None:
        task = outbox_task(client, keys, ref)
    if task is None:
        return 0
    with contextlib.suppress(redis.OutOfMemoryError):  # bookkeeping for the orphan sweep: no room, no harm
        client.hset(current_key(settings.key_prefix), worker_name(), f"{job}:{chunk}")
    try:
        failure = attempts > settings.max_attempts
        if failure:
            result = failed_chunk(
                task, f"the chunk was started {attempts - 1} times without an answer (worker crash?)"
            )
        else:
            try:
                with StopPoller(lambda: job_stopped(client, keys), settings.stop_poll_s) as poller:
                    result = solve_chunk(task, poller.flag)
            except SoftTimeLimitExceeded:
                result = failed_chunk(task, "the chunk exceeded the worker's time limit", Status.TIMEOUT)
                failure = True
            else:
                if poller.raised:
                    log.info("job %s stopped (purged) while chunk %s was solved; nothing written", job, chunk)
                    return 0
        written = store_result(client, result, settings.job_ttl, keep_answer=failure)
    finally:
        client.hdel(current_key(settings.key_prefix), worker_name())
    return len(result) if written else 0


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
        if not client.hexists(keys.stats, ref.chunk):
            log.warning("chunk %s:%s is neither in the outbox nor answered; dropped", ref.job, ref.chunk)
        return None
    task = ChunkTask.model_validate_json(read_outbox_entry(entry)[1])
    if (task.job, task.chunk) != (ref.job, ref.chunk):
        raise ValueError(f"outbox entry {ref.job}:{ref.chunk} holds chunk {task.job}:{task.chunk}")
    return task


@app.task(name=TASK_NAME, **TASK_OPTIONS)
def solve_chunk_task(*args: Any, **kwargs: Any) -> int:
    """Celery entry point (by name): `task=` a ChunkRef or ChunkTask; see `handle`.

    Whatever a message holds, a refusal is one log line that echoes none of it: other
    arguments, a malformed task, an outbox entry that is not a task, a key of the job of
    the wrong type.
    """
    try:
        return handle(only_task(args, kwargs), store_client())
    except BadArguments as exc:
        log.error("dropping a malformed chunk message: %s", exc)
    except ValidationError as exc:
        log.error("dropping a malformed chunk message: %s", validation_reasons(exc)[:500])
    except (ValueError, KeyError, TypeError) as exc:  # an outbox entry that is not a task
        log.error("dropping a chunk whose outbox entry is malformed: %s", one_line(exc))
    except redis.ResponseError as exc:  # WRONGTYPE: a key of the job is not what the pipeline keeps there
        log.error("dropping a chunk whose job keys are not the pipeline's: %s", one_line(exc))
    return 0


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


def handle_generate(payload: dict[str, Any], client: Any) -> int:
    """Generate one chunk (box, count, chunk seed, options) and store its lines; return the puzzles made.

    The message is checked with `GenerateTask` (the model the client builds it with)
    before anything runs. The stored body is JSON `{"n", "puzzles", "solutions", "meta",
    "error", "cpu_s"}` (line lists, as `client.generate.chunk_body` returns locally), so
    broker and local runs write the same files. Deliveries are counted as for solve
    chunks; a request the generator rejects, or a malformed one that still names a
    chunk of a live job, is answered with `error` instead of being redelivered.
    """
    try:
        task = GenerateTask.model_validate(payload)
    except ValidationError as exc:
        named = _named_chunk(payload)
        if named is None:
            raise
        job, chunk = named
        reason = f"bad generate request: {validation_reasons(exc)}"
        keys = JobKeys(job, settings.key_prefix)
        if count_delivery(client, keys, chunk) is None:
            raise  # no live job waits for it: dropped
        _store_generated(client, keys, chunk, {"n": 0, "error": reason[:500]}, 0.0)
        log.error("answering malformed generate message %s:%s with an error: %s", job, chunk, reason[:300])
        return 0
    keys = JobKeys(task.job, settings.key_prefix)
    attempts = count_delivery(client, keys, task.chunk)
    if attempts is None:
        return 0  # purged or expired: nobody is waiting for this chunk
    with contextlib.suppress(redis.OutOfMemoryError):  # bookkeeping for the orphan sweep: no room, no harm
        client.hset(current_key(settings.key_prefix), worker_name(), f"{task.job}:{task.chunk}")
    try:
        start = time.process_time()
        body: dict[str, Any] = {"n": 0, "puzzles": [], "solutions": [], "meta": [], "error": None}
        if attempts > settings.max_attempts:
            body["error"] = f"the chunk was started {attempts - 1} times without an answer (worker crash?)"
        else:
            try:
                box = task.shape()
                items = generate_chunk(box, task.count, task.seed, task.options.options())
                body["puzzles"], body["solutions"], body["meta"] = render_lines(items, box)
                body["n"] = len(items)
            except SoftTimeLimitExceeded:
                body["error"] = "the chunk exceeded the worker's time limit"
            except ValueError as exc:
                body["error"] = f"bad generate request: {type(exc).__name__}: {exc}"[:500]
        _store_generated(client, keys, task.chunk, body, time.process_time() - start)
    finally:
        client.hdel(current_key(settings.key_prefix), worker_name())
    return int(body["n"])


def _named_chunk(payload: Any) -> tuple[str, int] | None:
    """(job, chunk) of a message that names them well, however wrong the rest; None otherwise."""
    if not isinstance(payload, dict):
        return None
    job, chunk = payload.get("job"), payload.get("chunk")
    if isinstance(job, str) and re.match(JOB_ID_PATTERN, job) and type(chunk) is int and 0 <= chunk < 2**53:
        return job, chunk
    return None


def _store_generated(client: Any, keys: JobKeys, chunk: int, body: dict[str, Any], cpu: float) -> None:
    """Write a generate chunk's body (the pipeline's result write); a failure never replaces a chunk made."""
    body = {"puzzles": [], "solutions": [], "meta": [], **body, "cpu_s": cpu}
    stats = json.dumps({"n": body["n"], "cpu_s": cpu})
    commands = result_commands(
        keys, chunk, json.dumps(body).encode(), stats, body["n"], cpu, settings.job_ttl
    )
    write_unless_stopped(client, keys, commands, chunk if body["error"] is not None else None)


@app.task(name=GENERATE_TASK_NAME, **TASK_OPTIONS)
def generate_chunk_task(*args: Any, **kwargs: Any) -> int:
    """Celery entry point (by name): `task=` a GenerateTask; see `handle_generate`. Refusals: one log line."""
    try:
        return handle_generate(only_task(args, kwargs), store_client())
    except ValidationError as exc:
        log.error("dropping a malformed generate message: %s", validation_reasons(exc)[:500])
    except BadArguments as exc:
        log.error("dropping a malformed generate message: %s", exc)
    except redis.ResponseError as exc:  # WRONGTYPE: a key of the job is not what the pipeline keeps there
        log.error("dropping a generate chunk whose job keys are not the pipeline's: %s", one_line(exc))
    return 0


def beat(client: Any, name: str) -> None:
    """Record that worker process `name` is alive now."""
    client.zadd(workers_key(settings.key_prefix), {name: time.time()})


def start_heartbeat() -> None:
    """Beat every `heartbeat_s` from a daemon thread, so `status` can list live workers."""
    global _beat_started
    if _beat_started:
        return
    _beat_started = True
    name = worker_name()

    def loop() -> None:
        last_sweep = time.monotonic()
        while True:
            with contextlib.suppress(redis.RedisError):  # the broker is away; the task path reports that
                beat(store_client(), name)
                if time.monotonic() - last_sweep >= settings.orphan_after_s / 2:
                    last_sweep = time.monotonic()
                    try:
                        restore_orphans(store_client())
                    except Exception as exc:  # noqa: BLE001 - the beat must go on whatever the sweep meets
                        log.error("the sweep for orphaned chunk messages failed: %s", one_line(exc))
            time.sleep(settings.heartbeat_s)

    threading.Thread(target=loop, name="sudoku-batch-heartbeat", daemon=True).start()


def orphaned_tags(client: Any, now: float) -> list[bytes]:
    """Delivery tags of chunk messages left unacknowledged by a connection that is gone.

    Celery acknowledges late; a message delivered on a connection that then broke (Redis
    restarted, network cut) or to a worker that died whole stays in kombu's `unacked`
    hash until the visibility timeout (hours). A message is an orphan when it was
    delivered over `orphan_after_s` ago and no live worker process is solving its chunk
    now. Chunk results are idempotent, so a rare false orphan costs a second solve, never
    a second result.
    """
    old = client.zrangebyscore("unacked_index", "-inf", now - settings.orphan_after_s)
    if not old:
        return []
    live = set(client.zrangebyscore(workers_key(settings.key_prefix), now - 3 * settings.heartbeat_s, "+inf"))
    running = {v for k, v in client.hgetall(current_key(settings.key_prefix)).items() if k in live}
    out = []
    for tag, raw in zip(old, client.hmget("unacked", old), strict=True):
        if raw is None:
            continue
        with contextlib.suppress(ValueError, KeyError, TypeError, IndexError):
            message = json.loads(raw)[0]
            if message.get("headers", {}).get("task") != TASK_NAME:
                continue
            body = message["body"]
            if message.get("properties", {}).get("body_encoding") == "base64":
                body = base64.b64decode(body)
            chunk = json.loads(body)[1]["task"]
            if f"{chunk['job']}:{chunk['chunk']}".encode() not in running:
                out.append(tag)
    return out


def restore_orphans(client: Any) -> int:
    """Put orphaned chunk messages back on their queue (kombu's own restore); return how many."""
    tags = orphaned_tags(client, time.time())
    if not tags:
        return 0
    with app.connection_for_write() as conn:
        qos = conn.default_channel.qos
        for tag in tags:
            qos.restore_by_tag(tag.decode() if isinstance(tag, bytes) else tag, leftmost=True)
    log.warning("requeued %d chunk message(s) left unacknowledged by a lost connection or worker", len(tags))
    return len(tags)
