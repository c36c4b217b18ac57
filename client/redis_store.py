"""The Redis job store: one hash of metadata per job, one key per chunk result, an arrival list (key names and
the result write: `pipeline.contract.keys`, the worker's too)."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import redis

from client.config import ClientSettings
from client.redis_read import read_large
from client.store import CANCELLED, Checkpoint, JobStore, Superseded
from pipeline.contract.keys import (
    Frontier,
    JobKeys,
    current_key,
    job_stopped,
    part_commands,
    queued,
    result_commands,
    roots_key,
    split_count,
    wake_commands,
    workers_key,
)
from pipeline.contract.outbox import outbox_entry, read_outbox_entry
from pipeline.contract.part import Part, PartStats
from pipeline.contract.tasks import JOB_ID_PATTERN, MAX_NAME_CHARS
from pipeline.engine.roots import MAX_ROOTS

if TYPE_CHECKING:
    from client.store import Task
    from pipeline.contract.generate import GenerateResult

JOB_ID = re.compile(JOB_ID_PATTERN)
LIVE_WORKER_S = 20.0  # a worker process is live if it beat within this many seconds
COMMIT_TRIES = 8  # rounds of a producer's commit interrupted by a broken connection before it fails


class RedisJobStore(JobStore):
    """A JobStore in Redis, shared by every producer, worker and collector of the broker."""

    def __init__(self, client: redis.Redis, settings: ClientSettings) -> None:
        self.r = client
        self.settings = settings
        self.prefix = settings.key_prefix

    def keys(self, job: str) -> JobKeys:
        return JobKeys(job, self.prefix)

    def create(self, job: str, meta: dict[str, str]) -> None:
        run_commands(self.r, _hset(self.keys(job).meta, meta, self.settings.job_ttl))

    def meta(self, job: str) -> dict[str, str]:
        raw = self.r.hgetall(self.keys(job).meta)
        return {_s(k): _s(v) for k, v in raw.items()}

    def update(self, job: str, fields: dict[str, str]) -> None:
        """Set fields of a job that exists and is not stopped (a purged job is never re-created)."""
        k, ttl = self.keys(job), self.settings.job_ttl
        commands = _hset(k.meta, fields, ttl)
        if "state" in fields or "total" in fields:  # a collector waiting on it looks again
            commands += wake_commands(k, ttl)
        self._unless_stopped(k, commands)

    def _unless_stopped(self, k: JobKeys, commands: list[tuple[Any, ...]]) -> bool:
        """Run `commands` in one MULTI under WATCH of the job's stop key, unless the job is stopped or gone
        (a purge sets the key first: set in between, the EXEC is void and this looks again); True if run."""
        return self._watched((k.stop,), lambda pipe: job_stopped(pipe, k), commands)

    def _watched(
        self,
        keys: tuple[str, ...],
        refused: Callable[[Any], bool],
        commands: list[tuple[Any, ...]],
        voided: Callable[[], None] = lambda: None,
    ) -> bool:
        """Run `commands` in one MULTI under WATCH of `keys` unless `refused(pipe)`; an EXEC voided (a key
        changed, or the connection broke) calls `voided` and tries again, COMMIT_TRIES times; True if run."""
        for _ in range(COMMIT_TRIES):
            with self.r.pipeline(transaction=True) as pipe:
                try:
                    pipe.watch(*keys)
                    if refused(pipe):
                        return False
                    pipe.multi()
                    for command in commands:
                        pipe.execute_command(*command)
                    pipe.execute()
                    return True
                except redis.WatchError:
                    pass
            voided()
        return False

    def cancel(self, job: str) -> bool:
        """One MULTI under WATCH of the stop key: the job marked cancelled and its stop key set for its life
        (workers stop within their poll, queued chunks are dropped, the producer fenced off); parts stay."""
        k, ttl = self.keys(job), self.settings.job_ttl
        fields = {"state": "failed", "error": CANCELLED, "cancelled": f"{time.time():.3f}"}
        commands = [*_hset(k.meta, fields, ttl), ("SET", k.stop, "cancelled", "EX", ttl)]
        return self._unless_stopped(k, commands + wake_commands(k, ttl))

    def claim(self, job: str) -> str:
        token = uuid.uuid4().hex
        self.r.set(self.keys(job).producer, token, ex=self.settings.job_ttl)
        return token

    def _commit(
        self, job: str, token: str, meta: dict[str, str], answered: Part | None, task: Task | None
    ) -> None:
        """One MULTI under WATCH of the producer token: answered result, outbox entry of `task` (before it is
        sent: a producer killed before the send leaves it to the resume or `Resender`), checkpoint."""
        k, ttl = self.keys(job), self.settings.job_ttl
        commands: list[tuple[Any, ...]] = []
        if answered is not None:  # the producer's own answers: a new chunk, whole in one part (row 0)
            commands += self._publish(k, answered, answered.encode())
        if task is not None:  # stamped, kept until its result write drops it (a lost message: `Resender`)
            entry = outbox_entry(time.time(), task.model_dump_json())
            commands += _hset(k.outbox, {str(task.chunk): entry}, ttl)
        commands += _hset(k.meta, meta, ttl)
        if "state" in meta:  # produced (or resumed): a collector waiting on the job looks again
            commands += wake_commands(k, ttl)
        commands.append(("EXPIRE", k.producer, ttl))

        def check(client: Any, stop: bool = True) -> bool:
            if _s(client.get(k.producer) or b"") != token or (stop and client.exists(k.stop)):
                raise Superseded(f"job {job}: a resume took the submission over (or the job was purged)")
            return False

        # a voided EXEC: the token checked again outside WATCH (which rides out a broker restart)
        if not self._watched((k.producer, k.stop), check, commands, lambda: check(self.r, stop=False)):
            raise redis.ConnectionError(f"job {job}: the broker kept failing the commit of a chunk")

    def owns(self, job: str, token: str) -> bool:
        return _s(self.r.get(self.keys(job).producer) or b"") == token

    def put_result(self, job: str, result: Part | GenerateResult) -> bool:
        """Store a generate chunk's result, or a part of a new chunk answered whole (tests, the producer)."""
        run_commands(self.r, self._publish(self.keys(job), result, result.encode()))
        return True

    def _publish(self, k: JobKeys, result: Part | GenerateResult, data: bytes) -> list[tuple[Any, ...]]:
        """The commands that store `result` (a part, or a generate chunk's result) encoded as `data`."""
        head, stats = result.header, result.header.stats
        shared = (data, stats.model_dump_json(), stats.n, stats.cpu_s, self.settings.job_ttl)
        if isinstance(result, Part):
            return part_commands(
                k, head.chunk, head.row, *shared, complete=head.row + stats.n >= stats.chunk_n
            )
        return result_commands(k, head.chunk, *shared)

    def arrivals(self, job: str, cursor: int) -> tuple[list[Any], int]:
        got = self.r.lrange(self.keys(job).arrivals, cursor, -1)
        return [_arrival(c) for c in got], cursor + len(got)

    def arrived_count(self, job: str) -> int:
        k = self.keys(job)
        done, kind = self.r.hmget(k.meta, ["chunks_done", "kind"])
        if kind == b"generate":  # a generate chunk is answered whole: its arrivals, repeats included
            return int(self.r.llen(k.arrivals))
        return int(done or 0)

    def fetch(self, job: str, chunks: Sequence[Any]) -> list[bytes | None]:
        if not chunks:
            return []
        k = self.keys(job)
        if len(chunks) == 1:
            value = read_large(self.r, _result_key(k, chunks[0]))
            if value is not NotImplemented:
                return [value]
        return list(self.r.mget([_result_key(k, c) for c in chunks]))

    def stored(self, job: str, chunks: Sequence[Any]) -> list[bool]:
        k = self.keys(job)
        pipe = self.r.pipeline(transaction=False)
        for c in chunks:
            pipe.exists(_result_key(k, c))
        return [bool(n) for n in pipe.execute()] if chunks else []

    def job_ids(self, most: int) -> list[str]:
        """SCAN (never KEYS: it would block the broker) for job metadata keys; up to `most` ids."""
        head, tail = f"{self.prefix}:job:", ":meta"
        found: dict[str, None] = {}  # SCAN may return a key twice
        pattern = re.sub(r"([*?\[\]\\])", r"\\\1", head)  # the prefix as a literal: it may hold * ? [ ] or \
        for key in self.r.scan_iter(match=f"{pattern}*{tail}", count=1000):
            job = _s(key)[len(head) : -len(tail)]
            if JOB_ID.fullmatch(job):
                found[job] = None
                if len(found) >= most:
                    break
        return list(found)

    def created_at(self, jobs: Sequence[str]) -> dict[str, float]:
        """One pipelined HGET per job (a round trip for them all)."""
        pipe = self.r.pipeline(transaction=False)
        for job in jobs:
            pipe.hget(self.keys(job).meta, "created")
        raw = pipe.execute() if jobs else []
        return {job: float(at) for job, at in zip(jobs, raw, strict=True) if at is not None}

    def mark_collected(self, job: str, chunks: Sequence[Any], ttl: int) -> None:
        k = self.keys(job)
        pipe = self.r.pipeline(transaction=False)
        for c in chunks:
            if ttl > 0:
                pipe.expire(_result_key(k, c), ttl)
            else:
                pipe.delete(_result_key(k, c))  # safely in the output: nothing will read it again
        pipe.execute()

    def ack(self, job: str, parts: Sequence[Any], checkpoint: dict[str, Any]) -> None:
        """Drop the parts, record the checkpoint: one MULTI unless the job is stopped or gone."""
        k, names = self.keys(job), [f"{c}:{r}" for c, r in parts]
        commands: list[tuple[Any, ...]] = [("HSET", k.meta, "collected", json.dumps(checkpoint))]
        if parts:
            commands.append(("DEL", *[_result_key(k, p) for p in parts]))
            commands += [("SADD", k.collected, *names), ("EXPIRE", k.collected, self.settings.job_ttl)]
        self._unless_stopped(k, commands)

    def part_stats(self, job: str, parts: Sequence[Any]) -> list[tuple[Any, PartStats]]:
        """(part, statistics) of the given parts (those still recorded)."""
        if not parts:
            return []
        raw = self.r.hmget(self.keys(job).stats, [f"{c}:{r}" for c, r in parts])
        return [
            (p, PartStats.model_validate_json(v)) for p, v in zip(parts, raw, strict=True) if v is not None
        ]

    def split_total(self, job: str) -> int | None:
        """The puzzles of a job read in splits once the frontier passed its last split, else None. Once every
        split is done, the counts the frontier has not passed are summed here: a frontier left behind by a
        lost move would otherwise keep the job from completing."""
        k = self.keys(job)
        raw = self.r.get(k.frontier)
        chunks, done = (int(x or -1) for x in self.r.hmget(k.meta, ["chunks_total", "chunks_done"]))
        if chunks < 0:
            return None
        front = Frontier.parse(raw)
        if front.chunk < chunks <= done:  # read after the frontier: a split it passed meanwhile reads None
            front.advance([split_count(v) for v in self.r.hmget(k.counts, list(range(front.chunk, chunks)))])
        return front.index if front.chunk >= chunks else None

    def split_counted(self, job: str) -> int:
        """The puzzles of a job read in splits its workers counted so far: the splits the frontier passed."""
        return Frontier.parse(self.r.get(self.keys(job).frontier)).index

    def collected(self, job: str) -> tuple[dict[str, Any], set[Any]]:
        k = self.keys(job)
        raw = self.r.hget(k.meta, "collected")
        checkpoint = json.loads(raw) if raw else {}
        return checkpoint, {_arrival(x) for x in self.r.smembers(k.collected)} if checkpoint else set()

    def stats(self, job: str) -> list[PartStats]:
        raw = self.r.hvals(self.keys(job).stats)
        return [PartStats.model_validate_json(v) for v in raw]

    def hint(self, job: str) -> tuple[int, float]:
        n, cpu = self.r.hmget(self.keys(job).meta, ["hint_n", "hint_cpu"])
        return int(n or 0), float(cpu or 0.0)

    def wait(self, job: str, timeout: float) -> None:
        time.sleep(timeout)

    def wait_arrival(self, job: str, timeout: float) -> bool:
        """Block on the job's wake list (a part or a state change pushes a token): waiting costs nothing."""
        return self.r.blpop([self.keys(job).wake], timeout=max(0.01, timeout)) is not None

    def live_workers(self) -> list[str]:
        return list(self.worker_beats())

    def worker_beats(self) -> dict[str, float]:
        """Live worker process -> its last heartbeat (epoch seconds); processes silent an hour are dropped."""
        key = workers_key(self.prefix)
        now = time.time()
        self.r.zremrangebyscore(key, 0, now - 3600)
        beats = self.r.zrangebyscore(key, now - LIVE_WORKER_S, "+inf", withscores=True)
        return {_s(w): float(at) for w, at in beats}

    def worker_roots(self) -> dict[str, list[str]]:
        """Live worker process -> the data roots it says it has (`worker.heartbeat`; [] for none, or for what
        is no list of at most MAX_ROOTS texts): where the client may send it splits and datasets."""
        names = list(self.worker_beats())
        if not names:
            return {}
        raws = self.r.mget([roots_key(name, self.prefix) for name in names])
        return {name: _roots(raw) for name, raw in zip(names, raws, strict=True)}

    def current(self) -> dict[str, str]:
        """Live worker process -> the `job:chunk` it is solving now (a process between chunks is absent)."""
        live = set(self.live_workers())
        return {_s(w): _s(v) for w, v in self.r.hgetall(current_key(self.prefix)).items() if _s(w) in live}

    def outbox(self, job: str) -> dict[int, tuple[float, str]]:
        """Chunk -> (last sent, epoch s; task JSON) of every sent task whose result is not stored yet."""
        raw = self.r.hgetall(self.keys(job).outbox)
        return {int(chunk): read_outbox_entry(value) for chunk, value in raw.items()}

    def claim_resend(self, job: str, chunk: int, sent_at: float) -> bool:
        """Restamp an entry sent at `sent_at`, count a resend; False if its result came or it was claimed (a
        compare-and-set under WATCH: two collectors never both re-send a chunk)."""
        k = self.keys(job)
        with self.r.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(k.outbox)
                value = pipe.hget(k.outbox, str(chunk))
                at, task_json = read_outbox_entry(value) if value is not None else (None, "")
                if at != sent_at:
                    return False
                pipe.multi()
                pipe.hset(k.outbox, str(chunk), outbox_entry(time.time(), task_json))
                pipe.hincrby(k.meta, "resent", 1)
                pipe.execute()
            except redis.WatchError:
                return False
        return True

    def drop_idle_connections(self) -> None:
        """Disconnect the pool's idle connections: one an interrupt cut between a command's send and its
        reply still has the reply coming, which the next command would read as its own."""
        self.r.connection_pool.disconnect(inuse_connections=False)

    def queued(self) -> int:
        """Messages waiting in the workers' broker queue (kombu's Redis list per priority, summed)."""
        return queued(self.r, self.settings.queue)

    def purge(self, job: str, *, stop: bool = True) -> int:
        """Stop the job, then delete its keys: results by chunk id (no keyspace scan), metadata last. `stop`:
        the stop key (expiring after `stop_ttl` s) first, which every writer checks under WATCH."""
        k = self.keys(job)
        if stop:
            self.r.set(k.stop, "purged", ex=max(1, self.settings.stop_ttl))
        meta = self.meta(job)
        arrived = [_arrival(c) for c in self.r.lrange(k.arrivals, 0, -1)]
        chunks = max(
            [int(meta.get("chunks_sent", 0)), int(meta.get("chunks_total", 0)), Checkpoint.of(meta).chunks]
            + [(c[0] if isinstance(c, tuple) else c) + 1 for c in arrived]
        )
        removed = 0
        for first in range(0, chunks, 1000):
            ids = range(first, min(chunks, first + 1000))
            pipe = self.r.pipeline(transaction=False)
            for c in ids:
                pipe.hkeys(k.parts(c))
            rows = pipe.execute()
            names = [k.result(c) for c in ids] + [k.parts(c) for c in ids]
            names += [
                k.part(c, int(r)) for c, got in zip(ids, rows, strict=True) for r in got if r != b"done"
            ]
            for at in range(0, len(names), 1000):
                removed += int(self.r.delete(*names[at : at + 1000]))
        return removed + int(self.r.delete(*k.fixed()))


def _arrival(raw: Any) -> Any:
    """An arrival list entry: a part's (chunk, first row), or a generate chunk's id (an int)."""
    text = _s(raw)
    chunk, sep, row = text.partition(":")
    return (int(chunk), int(row)) if sep else int(chunk)


def _result_key(keys: JobKeys, result: Any) -> str:
    """The key of a part (chunk, row) or of a generate chunk's result (chunk)."""
    return keys.part(*result) if isinstance(result, tuple) else keys.result(result)


def _hset(key: str, fields: dict[str, str], ttl: int) -> list[tuple[Any, ...]]:
    """The commands that set `fields` of the hash `key` and renew its time to live."""
    return [("HSET", key, *[x for kv in fields.items() for x in kv]), ("EXPIRE", key, ttl)]


def run_commands(client: Any, commands: list[tuple[Any, ...]]) -> None:
    """Run raw commands in one MULTI/EXEC transaction."""
    pipe = client.pipeline(transaction=True)
    for command in commands:
        pipe.execute_command(*command)
    pipe.execute()


def _roots(raw: bytes | None) -> list[str]:
    """A worker's published data roots (a JSON list of strings, bounded); [] for anything else."""
    try:
        roots = json.loads(raw) if raw is not None and len(raw) <= MAX_ROOTS * (MAX_NAME_CHARS + 8) else []
    except ValueError:
        return []
    ok = isinstance(roots, list) and len(roots) <= MAX_ROOTS and all(isinstance(r, str) for r in roots)
    return roots if ok else []


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
