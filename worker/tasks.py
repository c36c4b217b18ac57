"""The one task: solve a chunk with `solvers.chunk.solve_chunk` and store its result in Redis.

Results never go through Celery's result backend: the task writes the chunk's result
under the job with the shared idempotent write (`solvers.chunk_store.result_commands`),
so a chunk redelivered after a crash overwrites its first answer instead of adding one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Any

import redis
from celery.exceptions import SoftTimeLimitExceeded
from pydantic import ValidationError

from solvers.chunk import TASK_NAME, ChunkResult, ChunkTask, failed_chunk, solve_chunk, worker_name
from solvers.chunk_store import JobKeys, result_commands, workers_key
from worker.app import app, settings

log = logging.getLogger(__name__)
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


def store_result(client: Any, result: ChunkResult, ttl: int) -> None:
    """Write a chunk result with the shared idempotent commands, in one transaction."""
    stats = result.header.stats
    keys = JobKeys(result.header.job, settings.key_prefix)
    commands = result_commands(
        keys, result.header.chunk, result.encode(), stats.model_dump_json(), stats.n, stats.cpu_s, ttl
    )
    pipe = client.pipeline(transaction=True)
    for command in commands:
        pipe.execute_command(*command)
    pipe.execute()


def handle(payload: dict[str, Any], client: Any) -> int:
    """Solve one chunk message and store its answer; return the puzzles answered (0: job gone).

    The job's chunk attempts are counted: a chunk whose worker died `max_attempts`
    times is answered with `error` results instead of being tried forever.
    """
    task = ChunkTask.model_validate(payload)
    keys = JobKeys(task.job, settings.key_prefix)
    if not client.exists(keys.meta):
        return 0  # purged or expired: nobody is waiting for this chunk
    attempts = int(client.hincrby(keys.attempts, task.chunk, 1))
    client.expire(keys.attempts, settings.job_ttl)
    if attempts > settings.max_attempts:
        result = failed_chunk(
            task, f"the chunk was started {attempts - 1} times without an answer (worker crash?)"
        )
    else:
        try:
            result = solve_chunk(task)
        except SoftTimeLimitExceeded:
            result = failed_chunk(task, "the chunk exceeded the worker's time limit")
    store_result(client, result, settings.job_ttl)
    return len(result)


@app.task(
    name=TASK_NAME,
    ignore_result=True,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(redis.ConnectionError, redis.TimeoutError),
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=20,
)
def solve_chunk_task(task: dict[str, Any]) -> int:
    """Celery entry point (by name); see `handle`."""
    try:
        return handle(task, store_client())
    except ValidationError as exc:
        log.error("dropping a malformed chunk message: %s", exc)
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
        while True:
            with contextlib.suppress(redis.RedisError):  # the broker is away; the task path reports that
                beat(store_client(), name)
            time.sleep(settings.heartbeat_s)

    threading.Thread(target=loop, name="sudoku-batch-heartbeat", daemon=True).start()
