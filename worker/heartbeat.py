"""Each pool process's liveness beat, and the sweep that requeues chunk messages orphaned by a lost worker.

Celery acknowledges late, so a message of a worker that died (or of a broken connection) stays unacknowledged
for the visibility timeout (hours). The main process records each chunk message it takes (`record_delivery`);
the chunk's result write drops the record. A record older than `orphan_after_s` whose chunk no live process is
solving is an orphan: the sweep has kombu put it back (`restore_by_tag`), or, when kombu no longer holds it
(dropped as Redis restarted) and the queue is empty, sends the chunk again from the outbox (`resend`). Results
are idempotent: a false orphan costs a second solve, never a second result (docs/decisions.md).

What each process solves (`Current`, in `sbatch:current`) is written again by every beat, so a removal Redis
refused goes within a beat; entries of processes killed outright go with `sweep_current`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import redis

from pipeline.contract.keys import (
    JobKeys,
    current_key,
    deliveries_key,
    job_stopped,
    queued,
    roots_key,
    workers_key,
)
from pipeline.contract.outbox import parse_task, read_outbox_entry
from pipeline.contract.tasks import JOB_ID_PATTERN, SOLVE_TASK_NAME, VERSION, ChunkRef, message_priority
from pipeline.engine.solve import worker_name
from worker.config import settings
from worker.connection import store_client
from worker.envelope import reason

log = logging.getLogger(__name__)
_beat_started = False
MAX_GENERATE_ENTRY_BYTES = 1 << 16  # a generate task's outbox entry (a few hundred bytes), read to resend


class Current:
    """This process's `sbatch:current` entry: what it is solving now, kept true by every beat."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a beat never writes back what a run just removed
        self._what: str | None = None

    @contextlib.contextmanager
    def solving(self, client: Any, what: str) -> Iterator[None]:
        """Name `what` (`job:chunk`; `job:chunk:race`, a helper) as solved here while the block runs; a
        Redis away or full neither refuses the run nor replaces the exception ending it: a beat mends it."""
        self._write(client, what)
        try:
            yield
        finally:
            self._write(client, None)

    def _write(self, client: Any, what: str | None) -> None:
        with self._lock:
            self._what = what
            with contextlib.suppress(redis.RedisError):  # the next beat writes it (`sync`)
                self._put(client)

    def sync(self, client: Any) -> None:
        """Write this process's entry as it is now (none while it runs nothing)."""
        with self._lock:
            self._put(client)

    def _put(self, client: Any) -> None:
        if self._what is None:
            client.hdel(current_key(settings.key_prefix), worker_name())
        else:
            client.hset(current_key(settings.key_prefix), worker_name(), self._what)


CURRENT = Current()  # this process's (each pool process runs one task at a time)


def beat(client: Any, name: str) -> None:
    """Record that worker process `name` is alive now, and its data roots (expiring, renewed each beat): a
    client sends splits only of inputs under every live worker's roots, and a dataset only under them."""
    client.zadd(workers_key(settings.key_prefix), {name: time.time()})
    ttl = max(60, int(4 * settings.heartbeat_s))
    client.set(roots_key(name, settings.key_prefix), json.dumps(settings.roots.texts), ex=ttl)


def start_heartbeat(app: Any) -> None:
    """Beat every `heartbeat_s` from a daemon thread, so `status` can list live workers; sweep for orphans
    (requeued through `app`'s broker connection) every `orphan_after_s / 2`."""
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
                CURRENT.sync(store_client())
                if time.monotonic() - last_sweep >= settings.orphan_after_s / 2:
                    last_sweep = time.monotonic()
                    try:
                        sweep_current(store_client(), time.time())
                        restore_orphans(store_client(), app)
                    except Exception as exc:  # noqa: BLE001 - the beat must go on whatever the sweep meets
                        log.error("the sweep for orphaned chunk messages failed: %s", reason(exc))
            time.sleep(settings.heartbeat_s)

    threading.Thread(target=loop, name="sudoku-batch-heartbeat", daemon=True).start()


def chunk_of(payload: Any) -> str | None:
    """`job:chunk` named by a chunk message's `task` argument (a ChunkRef, a task), or None."""
    if not isinstance(payload, dict):
        return None
    job, chunk = payload.get("job"), payload.get("chunk")
    if isinstance(job, str) and re.match(JOB_ID_PATTERN, job) and type(chunk) is int and 0 <= chunk < 2**53:
        return f"{job}:{chunk}"
    return None


def record_delivery(client: Any, tag: str, chunk: str, now: float) -> None:
    """Remember that the message `tag` of `chunk` (`job:chunk`) was taken by this worker at `now`."""
    client.hset(deliveries_key(settings.key_prefix), chunk, f"{tag}|{now:.3f}")


def orphans(client: Any, now: float) -> dict[str, str]:
    """`job:chunk` -> its delivery record (`tag|epoch s`) of chunk messages taken over `orphan_after_s` ago,
    still without a result, whose chunk no live worker is solving."""
    records = client.hgetall(deliveries_key(settings.key_prefix))
    if not records:
        return {}
    live = set(client.zrangebyscore(workers_key(settings.key_prefix), now - 3 * settings.heartbeat_s, "+inf"))
    running = {v for k, v in client.hgetall(current_key(settings.key_prefix)).items() if k in live}
    out = {}
    for chunk, raw in records.items():
        _, _, at = raw.decode().rpartition("|")
        with contextlib.suppress(ValueError):
            if now - float(at) >= settings.orphan_after_s and chunk not in running:
                out[chunk.decode()] = raw.decode()
    return out


def sweep_current(client: Any, now: float) -> int:
    """Drop the `sbatch:current` entries of worker processes without a beat for `orphan_after_s` (killed
    outright: their `finally` never ran); return how many."""
    key = current_key(settings.key_prefix)
    names = client.hkeys(key)
    if not names:
        return 0
    since = now - settings.orphan_after_s
    recent = set(client.zrangebyscore(workers_key(settings.key_prefix), since, "+inf"))
    gone = [name for name in names if name not in recent]
    if gone:
        client.hdel(key, *gone)
        log.warning("forgot what %d lost worker process(es) were solving", len(gone))
    return len(gone)


def restore_orphans(client: Any, app: Any) -> int:
    """Put orphaned chunk messages back on their queue (kombu's `restore_by_tag`), or send a chunk whose
    message was dropped again from its job's outbox (`resend`); return how many records were handled."""
    found = orphans(client, time.time())
    if not found:
        return 0
    restored = resent = 0
    with app.connection_for_write() as conn:
        qos = conn.default_channel.qos
        for chunk, record in found.items():
            tag = record.rpartition("|")[0]
            held = bool(client.hexists(qos.unacked_key, tag))  # unacknowledged: kombu can put it back
            if not held and queued(client, settings.queue):
                continue  # it may be waiting in the queue, put back by kombu: looked at once the queue drains
            if not forget(client, chunk, record):
                continue  # another process's sweep took it, or the chunk was delivered again meanwhile
            if held:
                qos.restore_by_tag(tag, leftmost=True)
                restored += 1
            elif resend(client, app, chunk):
                resent += 1
    if restored:
        log.warning(
            "requeued %d chunk message(s) left unacknowledged by a lost connection or worker", restored
        )
    if resent:
        log.warning("sent %d chunk(s) again whose message was dropped (a Redis restart?)", resent)
    return restored + resent


def forget(client: Any, chunk: str, record: str) -> bool:
    """Drop `chunk`'s delivery record if it is still `record`; True for the one sweep that dropped it."""
    key = deliveries_key(settings.key_prefix)
    with client.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(key)
            if pipe.hget(key, chunk) != record.encode():
                return False
            pipe.multi()
            pipe.hdel(key, chunk)
            pipe.execute()
        except redis.WatchError:  # another delivery recorded meanwhile: the next sweep looks again
            return False
    return True


def resend(client: Any, app: Any, chunk: str) -> bool:
    """Send `chunk` (`job:chunk`) again, as its client did, from the job's outbox (a solve chunk as a
    `ChunkRef`, the task's default time limits applying); False when there is nothing to send (answered,
    purged, failed, or past `max_attempts`: its last delivery answered it `error`)."""
    job, _, number = chunk.rpartition(":")
    keys = JobKeys(job, settings.key_prefix)
    if job_stopped(client, keys) or client.hget(keys.meta, "state") == b"failed":
        return False
    over = int(client.hget(keys.attempts, number) or 0) > settings.max_attempts
    if over or not client.hexists(keys.outbox, number):
        return False
    kind, priority = (v.decode() if v else None for v in client.hmget(keys.meta, "kind", "priority"))
    at = message_priority(priority, int(number))  # where its client sent it (`client.transport`)
    if kind != "generate":
        payload = ChunkRef(v=VERSION, job=job, chunk=int(number)).model_dump(mode="json")
        app.send_task(SOLVE_TASK_NAME, kwargs={"task": payload}, queue=settings.queue, priority=at)
        return True
    try:
        task = parse_task(read_outbox_entry(generate_entry(client, keys, number))[1])
    except ValueError as exc:  # pydantic's ValidationError too: not a task, never sent
        log.error(
            "chunk %s is not sent again: its outbox entry is not a generate task (%s)", chunk, reason(exc)
        )
        return False
    app.send_task(task.NAME, kwargs={"task": task.model_dump(mode="json")}, queue=settings.queue, priority=at)
    return True


def generate_entry(client: Any, keys: JobKeys, number: str) -> bytes:
    """A generate chunk's outbox entry, read only when it is no larger than one (ValueError otherwise)."""
    size = int(client.hstrlen(keys.outbox, number))
    if size > MAX_GENERATE_ENTRY_BYTES:
        raise ValueError(f"{size} bytes, over {MAX_GENERATE_ENTRY_BYTES}")
    return bytes(client.hget(keys.outbox, number) or b"")
