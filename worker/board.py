"""The Redis `Board` of one puzzle escalated across the fleet (`pipeline.escalation.board`): its keys
(`pipeline.contract.keys.EscalationKeys`), idle worker processes counted from their beats, helpers called
through Celery.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from pydantic import ValidationError

from pipeline.contract.keys import JobKeys, current_key, escalation_over, job_stopped, workers_key
from pipeline.engine.solve import worker_name
from pipeline.escalation.board import Board
from pipeline.escalation.task import MAX_SHARED_BATCHES, HelperEntry, HelperTask
from worker.app import app
from worker.config import settings

log = logging.getLogger(__name__)
LEASE_S = 3.0  # the owner refreshes its lease every poll; a dead owner's helpers stop this long after
ESCALATION_TTL_S = 60  # an escalation's entries (the owner drops them once folded)
STOP_TTL_S = 10  # an escalation's stop key: longer than a lease an owner may refresh as a helper closes it
MAX_ENTRY_BYTES = 1 << 20  # one helper's posted entry


class RedisBoard(Board):
    """The escalation keys of one job in Redis (`pipeline.contract.keys.EscalationKeys`); helpers are called
    through Celery."""

    def __init__(self, client: Any, job: str) -> None:
        self.client = client
        self.keys = JobKeys(job, settings.key_prefix)

    def open(self, chunk: int, row: int) -> None:
        keys = self.keys.escalation(chunk, row)
        with self.client.pipeline(transaction=False) as pipe:
            pipe.set(keys.lease, worker_name(), px=int(LEASE_S * 1000))
            for key in (keys.cubes, keys.refuted, keys.clauses):  # the cubes live as long as their escalation
                pipe.expire(key, ESCALATION_TTL_S)
            pipe.execute()

    def over(self, chunk: int, row: int) -> bool:
        return escalation_over(self.client, self.keys, self.keys.escalation(chunk, row))

    def close(self, chunk: int, row: int) -> None:
        keys = self.keys.escalation(chunk, row)
        if job_stopped(self.client, self.keys):  # purged: its helpers stop anyway; no key re-created
            self.client.delete(keys.lease, keys.entries)
            return
        with self.client.pipeline(transaction=True) as pipe:
            pipe.set(keys.stop, "1", ex=STOP_TTL_S)
            pipe.delete(keys.lease)
            pipe.execute()

    def post(self, chunk: int, row: int, helper: int, entry: HelperEntry) -> None:
        keys = self.keys.escalation(chunk, row)
        if job_stopped(self.client, self.keys):
            return  # a purged job's keys are not re-created (one written beside the purge expires)
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(keys.entries, str(helper), entry.model_dump_json())
            pipe.expire(keys.entries, ESCALATION_TTL_S)
            pipe.execute()

    def entries(self, chunk: int, row: int) -> dict[int, HelperEntry]:
        keys = self.keys.escalation(chunk, row)
        out = {}
        for helper, raw in self.client.hgetall(keys.entries).items():
            with contextlib.suppress(ValueError, ValidationError):  # a malformed entry is no answer
                if len(raw) <= MAX_ENTRY_BYTES:
                    out[int(helper)] = HelperEntry.model_validate_json(raw)
        return out

    def drop(self, chunk: int, row: int) -> None:
        keys = self.keys.escalation(chunk, row)
        self.client.delete(keys.entries, keys.cubes, keys.refuted, keys.clauses)

    def idle(self) -> int:
        now = time.time()
        beats = workers_key(settings.key_prefix)
        live = set(self.client.zrangebyscore(beats, now - 3 * settings.heartbeat_s, "+inf"))
        busy = set(self.client.hkeys(current_key(settings.key_prefix)))
        return len(live - busy)

    def call(self, task: HelperTask) -> None:
        app.send_task(
            task.NAME,
            kwargs={"task": task.model_dump(mode="json")},
            kwargsrepr=f"job={task.job} chunk={task.chunk} row={task.row} helper={task.helper}",
            queue=settings.queue,
        )

    def _create(self, chunk: int, row: int, cubes: str) -> bool | None:
        if job_stopped(self.client, self.keys):
            return None
        key = self.keys.escalation(chunk, row).cubes
        return bool(self.client.set(key, cubes, nx=True, ex=ESCALATION_TTL_S))

    def _stored(self, chunk: int, row: int) -> bytes | None:
        return self.client.get(self.keys.escalation(chunk, row).cubes)

    def _claim(self, chunk: int, row: int, helper: int, index: int, renew: bool) -> bool:
        hold = self.keys.escalation(chunk, row).hold(index)
        return bool(self.client.set(hold, str(helper), nx=not renew, xx=renew, px=int(LEASE_S * 1000)))

    def _mark(self, chunk: int, row: int, index: int, clause: str) -> bool:
        keys = self.keys.escalation(chunk, row)
        if job_stopped(self.client, self.keys):
            return False
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(keys.refuted, str(index), clause)
            pipe.expire(keys.refuted, ESCALATION_TTL_S)
            pipe.delete(keys.hold(index))
            pipe.execute()
        return True

    def _marked(self, chunk: int, row: int) -> list[Any]:
        return self.client.hkeys(self.keys.escalation(chunk, row).refuted)

    def _append(self, chunk: int, row: int, batch: str) -> bool:
        keys = self.keys.escalation(chunk, row)
        if self.client.llen(keys.clauses) >= MAX_SHARED_BATCHES:
            return False
        with self.client.pipeline(transaction=True) as pipe:
            pipe.rpush(keys.clauses, batch)
            pipe.expire(keys.clauses, ESCALATION_TTL_S)
            pipe.execute()
        return True

    def _batches(self, chunk: int, row: int, since: int) -> list[Any]:
        return self.client.lrange(self.keys.escalation(chunk, row).clauses, since, -1)
