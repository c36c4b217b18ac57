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
from solvers.chunk_store import JobKeys, current_key, result_commands, workers_key
from solvers.generator import Options, generate_chunk, render_lines
from solvers.puzzle import Box
from solvers.result import Status
from worker.app import app, settings

log = logging.getLogger(__name__)
TASK_OPTIONS: dict[str, Any] = {  # both tasks: results go to the job's keys, a lost worker redelivers
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


def store_result(client: Any, result: ChunkResult, ttl: int, keep_answer: bool = False) -> bool:
    """Write a chunk result with the shared idempotent commands, in one transaction; False if not written.

    `keep_answer` (failure answers: attempt or time limit) writes only if the chunk has no
    answer yet, so a chunk that finished and was delivered again keeps its good result.
    """
    stats = result.header.stats
    keys = JobKeys(result.header.job, settings.key_prefix)
    commands = result_commands(
        keys, result.header.chunk, result.encode(), stats.model_dump_json(), stats.n, stats.cpu_s, ttl
    )
    if keep_answer:
        return write_once(client, keys, result.header.chunk, commands)
    return run_transaction(client, commands)


def run_transaction(client: Any, commands: list[tuple[Any, ...]]) -> bool:
    """Run commands in one MULTI/EXEC; True (they always run)."""
    pipe = client.pipeline(transaction=True)
    for command in commands:
        pipe.execute_command(*command)
    pipe.execute()
    return True


def write_once(client: Any, keys: JobKeys, chunk: int, commands: list[tuple[Any, ...]]) -> bool:
    """Run a result's commands unless `chunk` is answered already (its stats field); True if they ran.

    Compare-and-set under WATCH of the job's stats hash, retried when another chunk's
    result lands in between; after ANSWER_ONCE_TRIES busy rounds it writes regardless
    (an answer, even a failure, beats a chunk never answered).
    """
    for _ in range(ANSWER_ONCE_TRIES):
        with client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(keys.stats)
                if pipe.hexists(keys.stats, chunk):
                    return False
                pipe.multi()
                for command in commands:
                    pipe.execute_command(*command)
                pipe.execute()
                return True
            except redis.WatchError:
                continue
    return run_transaction(client, commands)


def handle(payload: dict[str, Any], client: Any) -> int:
    """Solve one chunk message and store its answer; return the puzzles answered (0: job gone, or answered).

    The job's chunk attempts are counted: a chunk whose worker died `max_attempts`
    times is answered with `error` results instead of being tried forever, unless it
    has an answer already (a delivery after it finished): a good result is never replaced
    by a failure (attempt or time limit).
    """
    if isinstance(payload, dict) and "ref" in payload:  # a ChunkRef (what clients send): task in the outbox
        ref = ChunkRef.model_validate(payload)
        keys = JobKeys(ref.job, settings.key_prefix)
        if not client.exists(keys.meta):
            return 0  # purged or expired: nobody is waiting for this chunk
        task = outbox_task(client, keys, ref)
        if task is None:
            return 0
    else:  # the whole task in the message
        task = ChunkTask.model_validate(payload)
        keys = JobKeys(task.job, settings.key_prefix)
        if not client.exists(keys.meta):
            return 0  # purged or expired: nobody is waiting for this chunk
    client.hset(current_key(settings.key_prefix), worker_name(), f"{task.job}:{task.chunk}")
    attempts = int(client.hincrby(keys.attempts, task.chunk, 1))
    client.expire(keys.attempts, settings.job_ttl)
    failure = attempts > settings.max_attempts
    if failure:
        result = failed_chunk(
            task, f"the chunk was started {attempts - 1} times without an answer (worker crash?)"
        )
    else:
        try:
            result = solve_chunk(task)
        except SoftTimeLimitExceeded:
            result = failed_chunk(task, "the chunk exceeded the worker's time limit", Status.TIMEOUT)
            failure = True
    written = store_result(client, result, settings.job_ttl, keep_answer=failure)
    client.hdel(current_key(settings.key_prefix), worker_name())
    return len(result) if written else 0


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
def solve_chunk_task(task: dict[str, Any]) -> int:
    """Celery entry point (by name); see `handle`."""
    try:
        return handle(task, store_client())
    except ValidationError as exc:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        log.error("dropping a malformed chunk message: %s", reasons[:500])  # one line, no payload echoed
        return 0
    except (ValueError, KeyError, TypeError) as exc:  # an outbox entry that is not a task
        log.error("dropping a chunk whose outbox entry is malformed: %s", str(exc)[:500])
        return 0


GENERATE_TASK_NAME = "sudoku_batch.generate_chunk"  # sent by name by client/generate.py


def handle_generate(payload: dict[str, Any], client: Any) -> int:
    """Generate one chunk (box, count, chunk seed, options) and store its lines; return the puzzles made.

    The stored body is JSON `{"n", "puzzles", "solutions", "meta", "error", "cpu_s"}`
    (line lists, as `client.generate.chunk_body` returns locally), so broker and local
    runs write the same files. Attempts are counted as for solve chunks; a request the
    generator rejects is answered with `error` instead of being redelivered.
    """
    job, chunk = str(payload.get("job", "")), payload.get("chunk")
    if not re.match(JOB_ID_PATTERN, job) or not isinstance(chunk, int) or chunk < 0:
        log.error("dropping a malformed generate message: job %r chunk %r", job, chunk)
        return 0
    keys = JobKeys(job, settings.key_prefix)
    if not client.exists(keys.meta):
        return 0  # purged or expired: nobody is waiting for this chunk
    client.hset(current_key(settings.key_prefix), worker_name(), f"{job}:{chunk}")  # not lost: being made
    attempts = int(client.hincrby(keys.attempts, chunk, 1))
    client.expire(keys.attempts, settings.job_ttl)
    start = time.process_time()
    body: dict[str, Any] = {"n": 0, "puzzles": [], "solutions": [], "meta": [], "error": None}
    if attempts > settings.max_attempts:
        body["error"] = f"the chunk was started {attempts - 1} times without an answer (worker crash?)"
    else:
        try:
            box = Box.parse(str(payload["box"]))
            items = generate_chunk(
                box, int(payload["count"]), int(payload["seed"]), Options.from_dict(payload["options"])
            )
            body["puzzles"], body["solutions"], body["meta"] = render_lines(items, box)
            body["n"] = len(items)
        except SoftTimeLimitExceeded:
            body["error"] = "the chunk exceeded the worker's time limit"
        except (KeyError, TypeError, ValueError) as exc:
            body["error"] = f"bad generate request: {type(exc).__name__}: {exc}"
    body["cpu_s"] = cpu = time.process_time() - start
    stats = json.dumps({"n": body["n"], "cpu_s": cpu})
    commands = result_commands(
        keys, chunk, json.dumps(body).encode(), stats, body["n"], cpu, settings.job_ttl
    )
    if body["error"] is not None:  # a failure never replaces a chunk generated already
        write_once(client, keys, chunk, commands)
    else:
        run_transaction(client, commands)
    client.hdel(current_key(settings.key_prefix), worker_name())
    return int(body["n"])


@app.task(name=GENERATE_TASK_NAME, **TASK_OPTIONS)
def generate_chunk_task(task: dict[str, Any]) -> int:
    """Celery entry point (by name); see `handle_generate`."""
    return handle_generate(task, store_client())


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
                    except Exception:  # noqa: BLE001 - the beat must go on whatever the sweep meets
                        log.exception("the sweep for orphaned chunk messages failed")
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
