"""Where the engine meets the fleet in Redis: `RedisPort`, a chunk's job (`pipeline.engine.port.ChunkPort`:
deliveries counted, parts published under WATCH, the split frontier), and `RedisBoard`, one puzzle escalated
across the fleet (`pipeline.escalation.board`: its keys `pipeline.contract.keys.EscalationKeys`, idle worker
processes counted from their beats, helpers called through Celery).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import redis
from pydantic import ValidationError

from pipeline.contract.generate import GenerateResult
from pipeline.contract.keys import (
    Frontier,
    JobKeys,
    cost_commands,
    current_key,
    escalation_over,
    escalations_key,
    job_stopped,
    part_commands,
    published_rows,
    result_commands,
    split_count,
    workers_key,
)
from pipeline.contract.outbox import read_outbox_entry
from pipeline.contract.part import Part
from pipeline.contract.runs import overlaps
from pipeline.contract.tasks import MAX_TASK_CHARS, ChunkRef, ChunkTask
from pipeline.engine.gather import Cost, Meter
from pipeline.engine.solve import worker_name
from pipeline.escalation.board import Board
from pipeline.escalation.task import MAX_SHARED_BATCHES, HelperEntry, HelperTask
from worker.app import app
from worker.broker import say_full
from worker.config import settings

log = logging.getLogger(__name__)
LEASE_S = 3.0  # the owner refreshes its lease every poll; a dead owner's helpers stop this long after
ESCALATION_TTL_S = 60  # an escalation's entries (the owner drops them once folded)
STOP_TTL_S = 10  # an escalation's stop key: longer than a lease an owner may refresh as a helper closes it
MAX_ENTRY_BYTES = 1 << 20  # one helper's posted entry


class RedisBoard(Board):
    """The escalation keys of one job in Redis (`EscalationKeys`); helpers are called through Celery."""

    def __init__(self, client: Any, job: str) -> None:
        self.client = client
        self.keys = job_keys(job)
        self.job = job

    def open(self, chunk: int, row: int) -> None:
        keys, now = self.keys.escalation(chunk, row), time.time()
        live = escalations_key(settings.key_prefix)  # what `/metrics` counts: lapsed leases leave it here
        with self.client.pipeline(transaction=False) as pipe:
            pipe.set(keys.lease, worker_name(), px=int(LEASE_S * 1000))
            pipe.zadd(live, {self._named(chunk, row): now + LEASE_S})
            pipe.zremrangebyscore(live, "-inf", now)
            for key in (keys.cubes, keys.refuted, keys.clauses):  # the cubes live as long as their escalation
                pipe.expire(key, ESCALATION_TTL_S)
            pipe.execute()

    def over(self, chunk: int, row: int) -> bool:
        return escalation_over(self.client, self.keys, self.keys.escalation(chunk, row))

    def close(self, chunk: int, row: int) -> None:
        keys = self.keys.escalation(chunk, row)
        self.client.zrem(escalations_key(settings.key_prefix), self._named(chunk, row))
        if job_stopped(self.client, self.keys):  # purged: its helpers stop anyway; no key re-created
            self.client.delete(keys.lease, keys.entries)
            return
        self.client.pipeline(transaction=True).set(keys.stop, "1", ex=STOP_TTL_S).delete(keys.lease).execute()

    def _named(self, chunk: int, row: int) -> str:
        """The puzzle's member of the fleet's escalations (`escalations_key`)."""
        return f"{self.keys.job}:{chunk}:{row}"

    def post(self, chunk: int, row: int, helper: int, entry: HelperEntry) -> None:
        keys = self.keys.escalation(chunk, row)
        if not job_stopped(self.client, self.keys):  # a purged job's keys are not re-created
            self._expiring(keys.entries, ("HSET", keys.entries, str(helper), entry.model_dump_json()))

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
        with self.client.pipeline(transaction=False) as pipe:
            pipe.zrem(escalations_key(settings.key_prefix), self._named(chunk, row))
            pipe.delete(keys.entries, keys.cubes, keys.refuted, keys.clauses)
            pipe.execute()

    def idle(self) -> int:
        now = time.time()
        beats = workers_key(settings.key_prefix)
        live = set(self.client.zrangebyscore(beats, now - 3 * settings.heartbeat_s, "+inf"))
        busy = set(self.client.hkeys(current_key(settings.key_prefix)))
        return len(live - busy)

    def call(self, task: HelperTask) -> None:
        what = f"job={task.job} chunk={task.chunk} row={task.row} helper={task.helper}"
        payload = {"task": task.model_dump(mode="json")}
        app.send_task(task.NAME, kwargs=payload, kwargsrepr=what, queue=settings.queue)

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
        self._expiring(keys.refuted, ("HSET", keys.refuted, str(index), clause), ("DEL", keys.hold(index)))
        return True

    def _marked(self, chunk: int, row: int) -> list[Any]:
        return self.client.hkeys(self.keys.escalation(chunk, row).refuted)

    def _append(self, chunk: int, row: int, batch: str) -> bool:
        keys = self.keys.escalation(chunk, row)
        if self.client.llen(keys.clauses) >= MAX_SHARED_BATCHES:
            return False
        self._expiring(keys.clauses, ("RPUSH", keys.clauses, batch))
        return True

    def _batches(self, chunk: int, row: int, since: int) -> list[Any]:
        return self.client.lrange(self.keys.escalation(chunk, row).clauses, since, -1)

    def _expiring(self, key: str, *commands: tuple[Any, ...]) -> None:
        """Run `commands` in one MULTI that gives `key` (an escalation's) ESCALATION_TTL_S more."""
        with self.client.pipeline(transaction=True) as pipe:
            for command in (*commands, ("EXPIRE", key, ESCALATION_TTL_S)):
                pipe.execute_command(*command)
            pipe.execute()


MAX_OUTBOX_BYTES = 2 * MAX_TASK_CHARS + (1 << 20)  # an outbox entry: the task's JSON (escapes included)
ANSWER_ONCE_TRIES = 50  # compare-and-set rounds for a failure answer before it is written regardless
ROOM_POLL_S = 1.0  # seconds between writes tried while Redis is full
FRONTIER_BATCH = 256  # splits' counts read per round when the frontier moves
Commands = list[tuple[Any, ...]]


def job_keys(job: str) -> JobKeys:
    """The keys of `job` under this worker's prefix."""
    return JobKeys(job, settings.key_prefix)


class RedisPort:
    """Where a worker's run of one task meets its job (`pipeline.engine.port.ChunkPort`): the job's keys in
    Redis; the run's cost (`meter`, from the port's making) goes with each part into its publishing MULTI."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.meter = Meter()  # a pool process runs one task at a time: its CPU clock is the task's

    def count_delivery(self, job: str, chunk: int) -> int | None:
        """Count one more delivery of `chunk` and return the count; None when the job is stopped or gone."""
        keys = job_keys(job)
        count = [("HINCRBY", keys.attempts, chunk, 1), ("EXPIRE", keys.attempts, settings.job_ttl)]
        replies = write_unless_stopped(self.client, keys, count)
        return None if replies is None else int(replies[0])

    def answered(self, job: str, chunk: int) -> list[tuple[int, int]] | None:
        return published_rows(self.client.hgetall(job_keys(job).parts(chunk)))

    def publish(self, part: Part) -> bool:
        return self._paid(lambda cost: publish_part(self.client, part, settings.job_ttl, cost))

    def settle(self, job: str) -> None:
        charge(self.client, job_keys(job), self.meter.take())

    def stopped(self, job: str) -> bool:
        return job_stopped(self.client, job_keys(job))

    def fail_job(self, job: str, reason: str) -> None:
        keys = job_keys(job)
        log.error("job %s failed: %s", job, reason)
        failed = [("HSET", keys.meta, "state", "failed", "error", reason[:500])]
        write_unless_stopped(self.client, keys, failed)

    def publish_generated(self, result: GenerateResult) -> None:
        failed = result.error is not None
        self._paid(lambda cost: store_result(self.client, result, settings.job_ttl, failed, cost) is not None)

    def _paid(self, write: Callable[[Cost], bool]) -> bool:
        """`write(cost)` with the run's cost so far; the cost goes back to the meter unless it was written."""
        cost, written = self.meter.take(), False
        try:
            written = write(cost)
        finally:
            if not written:
                self.meter.give_back(cost)
        return written

    def split_read(self, job: str, chunk: int, input_no: int, lines: int, entries: int) -> None:
        """Record a split's counts, then move the job's frontier over every split counted by now."""
        keys, ttl = job_keys(job), settings.job_ttl
        counts = [("HSET", keys.counts, chunk, f"{input_no} {lines} {entries}"), ("EXPIRE", keys.counts, ttl)]
        write_unless_stopped(self.client, keys, counts)
        advance_frontier(self.client, keys, ttl)

    def split_offsets(self, job: str, chunk: int) -> tuple[int, int] | None:
        raw = self.client.hget(job_keys(job).offsets, chunk)
        if raw is None:
            return None
        line, index = (int(x) for x in raw.split())
        return line, index

    def count_frontier(self, job: str) -> bool:
        """Count the first split nobody has counted (its worker is slow, dead, or its message queued behind
        this one) from its outbox task; False when there is none to count. One outside this worker's data
        roots is not opened: the job fails in one line (JobStopped)."""
        from pipeline.engine.dataset import JobStopped, check_roots
        from pipeline.engine.roots import OutsideRoots
        from pipeline.engine.splits import read_split

        keys = job_keys(job)
        front = Frontier.parse(self.client.get(keys.frontier))
        if self.client.hexists(keys.counts, front.chunk):  # counted meanwhile: move on
            advance_frontier(self.client, keys, settings.job_ttl)
            return True
        task = outbox_task(self.client, keys, ChunkRef(job=job, chunk=front.chunk))
        if task is None or task.split is None:
            return False
        try:
            check_roots(task, settings.roots)
        except OutsideRoots as exc:
            self.fail_job(job, f"worker {worker_name()} {exc}")
            raise JobStopped(f"job {job} failed: a split outside the data roots") from None
        read = read_split(task)
        log.info("counted split %s:%s for the splits after it (its own worker is late)", job, front.chunk)
        self.split_read(job, task.chunk, task.split.input, read.lines, read.entries)
        return True


def advance_frontier(client: Any, keys: JobKeys, ttl: int) -> None:
    """Move the job's split frontier over every split counted (`pipeline.contract.keys.Frontier`), writing the
    offsets of each split passed; a compare-and-set (of two workers at once, the later goes again). Passing
    nothing is checked too: a frontier moved between the reads of it and of the counts leaves counts that
    look missing, and the split counted last would then wait for ever."""
    while True:
        with client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(keys.frontier, keys.stop)
                if job_stopped(pipe, keys):
                    return
                front = Frontier.parse(pipe.get(keys.frontier))
                fields = list(range(front.chunk, front.chunk + FRONTIER_BATCH))
                passed = front.advance([split_count(v) for v in pipe.hmget(keys.counts, fields)])
                pipe.multi()
                if not passed:  # nothing to pass, if the frontier did not move since it was read
                    pipe.get(keys.frontier)
                    pipe.execute()
                    return
                pipe.hset(keys.offsets, mapping={c: f"{line} {index}" for c, line, index in passed})
                pipe.hdel(keys.counts, *[c for c, _, _ in passed])
                pipe.set(keys.frontier, front.text(), ex=ttl)
                pipe.expire(keys.offsets, ttl)
                pipe.execute()
            except redis.WatchError:
                continue
        if len(passed) < FRONTIER_BATCH:
            return


def transact(client: Any, keys: JobKeys, watched: list[str], build: Callable[[Any], Commands | None]) -> Any:
    """Run the commands `build(pipe)` returns in one MULTI/EXEC unless the job is stopped or gone or `build`
    returns None: their replies, or None. WATCH of the stop key (a purge sets it first) and of `watched`
    makes a change in between abort the EXEC (redis.WatchError: the caller goes again); a full Redis is
    waited out."""
    while True:
        with client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(keys.stop, *watched)
                commands = None if job_stopped(pipe, keys) else build(pipe)
                if commands is None:
                    return None
                pipe.multi()
                for command in commands:
                    pipe.execute_command(*command)
                return list(pipe.execute())
            except redis.OutOfMemoryError:
                say_full(f"results wait for room (a try every {ROOM_POLL_S:g} s)")
                time.sleep(ROOM_POLL_S)


def write_unless_stopped(
    client: Any, keys: JobKeys, commands: Commands, unanswered: int | None = None
) -> Any:
    """Run `commands` in one MULTI/EXEC (`transact`) unless the job is stopped or gone, or, with `unanswered`,
    that chunk has an answer already; their replies, or None. After ANSWER_ONCE_TRIES rounds busy with other
    chunks' results the answer check is dropped (an answer, even a failure, beats none), never the stop's."""
    check = unanswered

    def build(pipe: Any) -> Commands | None:
        return None if check is not None and pipe.hexists(keys.stats, check) else commands

    for busy in range(ANSWER_ONCE_TRIES + 1):
        check = unanswered if busy < ANSWER_ONCE_TRIES else None
        with contextlib.suppress(redis.WatchError):
            return transact(client, keys, [keys.stats] if check is not None else [], build)
    return None  # the stop key kept changing: a purge is under way


def store_result(
    client: Any, result: Part | GenerateResult, ttl: int, keep_answer: bool = False, cost: Cost = (0, 0)
) -> Any:
    """Write a chunk result with the shared idempotent commands (`write_unless_stopped`); None if not written.
    `keep_answer` (failure answers: attempt or time limit) writes only if the chunk has no answer yet, so
    a chunk that finished and was delivered again keeps its good result."""
    stats = result.header.stats
    keys = job_keys(result.header.job)
    commands = result_commands(
        keys, result.header.chunk, result.encode(), stats.model_dump_json(), stats.n, stats.cpu_s, ttl, cost
    )
    return write_unless_stopped(client, keys, commands, result.header.chunk if keep_answer else None)


def publish_part(client: Any, part: Part, ttl: int, cost: Cost = (0, 0)) -> bool:
    """Publish one part of a solve chunk (`transact`, watching the chunk's parts hash) with its run's `cost`
    unless the job is stopped or gone, or any of its rows is answered already (a chunk delivered twice at
    once); True when written."""
    head, stats, runs = part.header, part.header.stats, part.row_runs()
    keys = job_keys(head.job)
    payload = part.encode()

    def commands(pipe: Any) -> Commands | None:
        published = published_rows(pipe.hgetall(keys.parts(head.chunk)))
        if published is None or overlaps(runs, published):
            return None  # answered already: every row keeps its first record
        complete = sum(c for _, c in published) + len(part) >= stats.chunk_n
        return part_commands(
            keys,
            head.chunk,
            head.row,
            payload,
            stats.model_dump_json(),
            stats.n,
            stats.cpu_s,
            ttl,
            complete,
            runs,
            cost,
        )

    while True:
        with contextlib.suppress(redis.WatchError):
            return transact(client, keys, [keys.parts(head.chunk)], commands) is not None


def charge(client: Any, keys: JobKeys, cost: Cost) -> None:
    """Add a run's cost no part carried (its end, a helper's race) to its job's meta, under WATCH of the meta:
    a job gone (purged) is not re-created; a cancelled one is charged (its runs did use the CPU)."""
    while any(cost):
        with client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(keys.meta)
                if not pipe.exists(keys.meta):
                    return
                pipe.multi()
                for command in cost_commands(keys, cost):
                    pipe.execute_command(*command)
                pipe.execute()
                return
            except redis.WatchError:
                continue  # the meta changed meanwhile (another part's counts): go again
            except redis.OutOfMemoryError:  # never waited for: the run's answers are published already
                log.warning("job %s: %.3f CPU s of a run not counted: Redis is full", keys.job, cost[0] / 1e9)
                return


def outbox_task(client: Any, keys: JobKeys, ref: ChunkRef) -> ChunkTask | None:
    """The task a ChunkRef names, from the job's outbox; None when the chunk is answered already (the result's
    MULTI drops the entry: a redelivery of an answered chunk, or a job being purged, has nothing to solve)."""
    size = int(client.hstrlen(keys.outbox, str(ref.chunk)))
    if size > MAX_OUTBOX_BYTES:  # checked before reading: a hand-made entry cannot make us allocate it
        raise ValueError(f"outbox entry {ref.job}:{ref.chunk} is {size} bytes, over {MAX_OUTBOX_BYTES}")
    entry = client.hget(keys.outbox, str(ref.chunk)) if size else None
    if entry is None:
        if not client.hexists(keys.parts(ref.chunk), "done"):
            log.warning("chunk %s:%s is neither in the outbox nor answered; dropped", ref.job, ref.chunk)
        return None
    task = ChunkTask.model_validate_json(read_outbox_entry(entry)[1])
    if (task.job, task.chunk) != (ref.job, ref.chunk):
        raise ValueError(f"outbox entry {ref.job}:{ref.chunk} holds chunk {task.job}:{task.chunk}")
    return task
