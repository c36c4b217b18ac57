"""`MemoryStore`: the job store inside one process, for the embedded mode (`client.store.JobStore`)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from client.store import CANCELLED, Decode, JobStore, Superseded, decode_solve
from pipeline.contract.keys import COST_FIELDS
from pipeline.contract.part import Part, PartStats
from pipeline.contract.runs import overlaps

if TYPE_CHECKING:
    from client.store import Task
    from pipeline.contract.generate import GenerateResult


class MemoryStore(JobStore):
    """A job store inside one process (embedded mode): dictionaries under one condition variable.

    It keeps no outbox of sent tasks (`RedisJobStore.commit`): local processes get their
    chunks through a pipe of this process and cannot lose one unnoticed; a crashed process
    fails the job instead (and nothing outlives the process to resume). Collected results
    expire as in Redis: at once when collected with ttl 0, else `ttl` seconds later.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock  # when collected results expire (a fake in tests)
        self._cond = threading.Condition()
        self._meta: dict[str, dict[str, str]] = {}
        self._results: dict[str, dict[int, tuple[Any, bytes | None]]] = {}  # result, its encoding
        self._stats: dict[str, dict[int, PartStats]] = {}
        self._arrivals: dict[str, list[Any]] = {}  # part ids (chunk, row), or a generate run's chunk ids
        self._parts: dict[str, dict[int, dict[int, int]]] = {}  # chunk -> first row -> rows published
        self._done: dict[str, int] = {}  # chunks every row of which is answered
        self._hint: dict[str, tuple[int, float]] = {}
        self._tokens: dict[str, str] = {}
        self._expiry: dict[str, dict[int, float]] = {}  # collected results: monotonic time they go
        self.workers: list[str] = []

    def create(self, job: str, meta: dict[str, str]) -> None:
        with self._cond:
            self._meta[job] = dict(meta)
            self._results[job], self._stats[job], self._arrivals[job] = {}, {}, []
            self._parts[job], self._done[job] = {}, 0
            self._hint[job] = (0, 0.0)

    def meta(self, job: str) -> dict[str, str]:
        with self._cond:
            return dict(self._meta.get(job, {}))

    def update(self, job: str, fields: dict[str, str]) -> None:
        with self._cond:
            if job in self._meta:
                self._meta[job].update(fields)
            self._cond.notify_all()

    def claim(self, job: str) -> str:
        with self._cond:
            self._tokens[job] = token = uuid.uuid4().hex
            return token

    def _commit(
        self, job: str, token: str, meta: dict[str, str], answered: Part | None, task: Task | None
    ) -> None:
        with self._cond:  # a re-entrant lock: put_result and update take it again
            if self._tokens.get(job) != token:
                raise Superseded(f"job {job}: a resume took the submission over (or the job was purged)")
            if answered is not None:
                self.put_result(job, answered)
            self.update(job, meta)

    def owns(self, job: str, token: str) -> bool:
        with self._cond:
            return self._tokens.get(job) == token

    def put_result(self, job: str, result: Part | GenerateResult, payload: bytes | None = None) -> bool:
        """Keep the result object itself: the collector in this process reads it without decoding. A part
        any of whose rows is answered already is refused (False), as in Redis."""
        with self._cond:
            if job not in self._results:
                return False  # purged
            stats = result.header.stats
            key: Any = result.header.chunk
            if isinstance(result, Part):
                parts = self._parts[job].setdefault(key, {})
                runs = result.row_runs()
                if -1 in parts or overlaps(runs, sorted(parts.items())):
                    return False
                parts.update(runs)
                if sum(parts.values()) >= stats.chunk_n:
                    parts[-1] = 0  # done
                    self._done[job] += 1
                key = result.part
            else:
                self._done[job] += 1
            self._results[job][key] = (result, payload)
            self._stats[job][key] = stats
            self._arrivals[job].append(key)
            n, cpu = self._hint[job]
            self._hint[job] = (n + stats.n, cpu + stats.cpu_s)
            self._cond.notify_all()
            return True

    def charge(self, job: str, cost: tuple[int, int]) -> None:
        with self._cond:
            meta = self._meta.get(job)
            if meta is not None:
                for field, ns in zip(COST_FIELDS, cost, strict=True):
                    meta[field] = str(int(meta.get(field, 0)) + int(ns))

    def answered(self, job: str, chunk: int) -> list[tuple[int, int]] | None:
        """(first row, rows) of the parts of `chunk` published; None once it is complete (or purged)."""
        with self._cond:
            parts = self._parts.get(job, {}).get(chunk, {})
            return None if -1 in parts or job not in self._parts else sorted(parts.items())

    def arrivals(self, job: str, cursor: int) -> tuple[list[Any], int]:
        with self._cond:
            got = self._arrivals.get(job, [])[cursor:]
            return list(got), cursor + len(got)

    def fetch(self, job: str, chunks: Sequence[Any]) -> list[bytes | None]:
        got = self._kept(job, chunks)
        return [None if k is None else k[1] if k[1] is not None else k[0].encode() for k in got]

    def fetch_results(self, job: str, chunks: Sequence[Any], decode: Decode = decode_solve) -> list[Any]:
        return [None if k is None else k[0] for k in self._kept(job, chunks)]

    def stored(self, job: str, chunks: Sequence[Any]) -> list[bool]:
        return [k is not None for k in self._kept(job, chunks)]

    def job_ids(self, most: int) -> list[str]:
        with self._cond:
            return list(self._meta)[:most]

    def created_at(self, jobs: Sequence[str]) -> dict[str, float]:
        with self._cond:
            metas = [(job, self._meta.get(job, {})) for job in jobs]
        return {job: float(meta["created"]) for job, meta in metas if "created" in meta}

    def cancel(self, job: str) -> bool:
        """The job marked cancelled as in Redis (no stop key: this process's own pool runs its chunks)."""
        with self._cond:
            meta = self._meta.get(job)
            if meta is None or meta.get("cancelled"):
                return False
            meta.update(state="failed", error=CANCELLED, cancelled=f"{time.time():.3f}")
            self._cond.notify_all()
            return True

    def _kept(self, job: str, chunks: Sequence[Any]) -> list[tuple[Any, bytes | None] | None]:
        with self._cond:
            self._expire(job)
            results = self._results.get(job, {})
            return [results.get(c) for c in chunks]

    def mark_collected(self, job: str, chunks: Sequence[Any], ttl: int) -> None:
        """Drop collected results at once (ttl 0: a collector that will not read again), else keep
        them `ttl` seconds, so the job can be read again (`Job.results()` twice), as in Redis."""
        with self._cond:
            results = self._results.get(job, {})
            expiry = self._expiry.setdefault(job, {})
            for c in chunks:
                if ttl <= 0:
                    results.pop(c, None)
                    expiry.pop(c, None)
                else:
                    expiry[c] = self._clock() + ttl
            self._expire(job)

    def _expire(self, job: str) -> None:
        """Drop the job's collected results whose time is up (under the lock)."""
        now = self._clock()
        expiry = self._expiry.get(job, {})
        for c in [c for c, at in expiry.items() if at <= now]:
            del expiry[c]
            self._results.get(job, {}).pop(c, None)

    def stats(self, job: str) -> list[PartStats]:
        with self._cond:
            return list(self._stats.get(job, {}).values())

    def hint(self, job: str) -> tuple[int, float]:
        with self._cond:
            return self._hint.get(job, (0, 0.0))

    def wait(self, job: str, timeout: float) -> None:
        with self._cond:
            self._cond.wait(timeout)

    def wait_arrival(self, job: str, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait(timeout)

    def live_workers(self) -> list[str]:
        return list(self.workers)

    def purge(self, job: str, *, stop: bool = True) -> int:
        with self._cond:
            found = job in self._meta
            tables = (
                self._meta,
                self._results,
                self._stats,
                self._arrivals,
                self._parts,
                self._done,
                self._hint,
                self._tokens,
                self._expiry,
            )
            for table in tables:
                table.pop(job, None)  # type: ignore[attr-defined]
            self._cond.notify_all()
            return int(found)

    def arrived_count(self, job: str) -> int:
        """How many chunks are answered whole (the producer's backpressure reads this)."""
        with self._cond:
            return self._done.get(job, 0)
