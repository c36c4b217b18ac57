"""Each pool process's liveness beat, and the sweep that requeues chunk messages orphaned by a lost worker.

Celery acknowledges late; a message delivered to a worker that then died whole, or on a
connection that broke (Redis restarted), stays unacknowledged in the broker until the
visibility timeout (hours). The worker's main process records each chunk message it takes
(`record_delivery`: `job:chunk` -> its delivery tag, in the pipeline's own hash); the
chunk's result write drops the record in its MULTI (`pipeline.keys.result_commands`). A
record older than `orphan_after_s` whose chunk no live worker process is solving is an
orphan: the sweep asks kombu's Redis QoS to put that delivery back on its queue
(`restore_by_tag`, a no-op for a message already acknowledged: a chunk dropped unsolved)
and drops the record. Chunk results are idempotent, so a rare false orphan costs a second
solve, never a second result. Nothing here reads kombu's own keys.

Each process names the chunk it is solving in `sbatch:current` and removes the entry when
done; a process killed outright (SIGKILL, the out-of-memory killer) never does, and its
entry stayed for ever. The same sweep drops entries of processes silent `orphan_after_s`
(`sweep_current`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
import time
from typing import Any

import redis

from pipeline.keys import current_key, deliveries_key, roots_key, workers_key
from pipeline.solve import worker_name
from pipeline.tasks import JOB_ID_PATTERN
from worker.config import settings
from worker.connection import store_client
from worker.consumer import reason

log = logging.getLogger(__name__)
_beat_started = False


def beat(client: Any, name: str) -> None:
    """Record that worker process `name` is alive now, and its data roots."""
    client.zadd(workers_key(settings.key_prefix), {name: time.time()})
    publish_roots(client, name)


def publish_roots(client: Any, name: str) -> None:
    """Say which data roots worker process `name` has (`settings.roots`; expiring, renewed each beat): a
    client sends splits only of inputs under every live worker's roots, and a dataset only under them."""
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
    """`job:chunk` -> delivery tag of chunk messages taken over `orphan_after_s` ago, still without a result,
    whose chunk no live worker is solving."""
    records = client.hgetall(deliveries_key(settings.key_prefix))
    if not records:
        return {}
    live = set(client.zrangebyscore(workers_key(settings.key_prefix), now - 3 * settings.heartbeat_s, "+inf"))
    running = {v for k, v in client.hgetall(current_key(settings.key_prefix)).items() if k in live}
    out = {}
    for chunk, raw in records.items():
        tag, _, at = raw.decode().rpartition("|")
        with contextlib.suppress(ValueError):
            if now - float(at) >= settings.orphan_after_s and chunk not in running:
                out[chunk.decode()] = tag
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
    """Put orphaned chunk messages back on their queue (kombu's `restore_by_tag`); return how many records."""
    found = orphans(client, time.time())
    if not found:
        return 0
    with app.connection_for_write() as conn:
        qos = conn.default_channel.qos
        for chunk, tag in found.items():
            qos.restore_by_tag(tag, leftmost=True)
            client.hdel(deliveries_key(settings.key_prefix), chunk)
    log.warning("requeued %d chunk message(s) left unacknowledged by a lost connection or worker", len(found))
    return len(found)
