"""`MemoryStore`: the job store inside one process, for the embedded mode (`client.store.JobStore`)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from client.store import CANCELLED, Decode, JobStore, Superseded, decode_solve
from pipeline.contract.keys import COST_FIELDS
from pipeline.contract.part import Part, PartStats
from pipeline.contract.runs import overlaps

if TYPE_CHECKING:
    from client.store import Task
    from pipeline.contract.generate import GenerateResult


@dataclass
class _Job:
    """One job's entries: its metadata, results (and their encodings), statistics and arrivals."""

    meta: dict[str, str]
    results: dict[Any, Any] = field(default_factory=dict)  # each result object, as it was put
    stats: dict[Any, PartStats] = field(default_factory=dict)
    arrivals: list[Any] = field(default_factory=list)  # part ids (chunk, row), or a generate run's chunk ids
    parts: dict[int, dict[int, int]] = field(default_factory=dict)  # chunk -> first row -> rows published
    done: int = 0  # chunks every row of which is answered
    hint: tuple[int, float] = (0, 0.0)
    expiry: dict[Any, float] = field(default_factory=dict)  # collected results: the clock's time they go


class MemoryStore(JobStore):
    """A job store inside one process (embedded mode), under one condition variable: no outbox (local
    processes lose no chunk unnoticed; nothing outlives the process to resume); collected results expire as in
    Redis."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock  # when collected results expire (a fake in tests)
        self._cond = threading.Condition()
        self._jobs: dict[str, _Job] = {}
        self._tokens: dict[str, str] = {}

    def create(self, job: str, meta: dict[str, str]) -> None:
        with self._cond:
            self._jobs[job] = _Job(dict(meta))

    def meta(self, job: str) -> dict[str, str]:
        with self._cond:
            return dict(self._jobs[job].meta) if job in self._jobs else {}

    def update(self, job: str, fields: dict[str, str]) -> None:
        with self._cond:
            if job in self._jobs:
                self._jobs[job].meta.update(fields)
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

    def put_result(self, job: str, result: Part | GenerateResult) -> bool:
        """Keep the result object itself (the collector here reads it undecoded); a part any of whose rows is
        answered already is refused (False), as in Redis."""
        with self._cond:
            state = self._jobs.get(job)
            if state is None:
                return False  # purged
            stats = result.header.stats
            key: Any = result.header.chunk
            if isinstance(result, Part):
                parts = state.parts.setdefault(key, {})
                runs = result.row_runs()
                if -1 in parts or overlaps(runs, sorted(parts.items())):
                    return False
                parts.update(runs)
                if sum(parts.values()) >= stats.chunk_n:
                    parts[-1] = 0  # done
                    state.done += 1
                key = result.part
            else:
                state.done += 1
            state.results[key] = result
            state.stats[key] = stats
            state.arrivals.append(key)
            state.hint = (state.hint[0] + stats.n, state.hint[1] + stats.cpu_s)
            self._cond.notify_all()
            return True

    def charge(self, job: str, cost: tuple[int, int]) -> None:
        with self._cond:
            if job in self._jobs:
                meta = self._jobs[job].meta
                for name, ns in zip(COST_FIELDS, cost, strict=True):
                    meta[name] = str(int(meta.get(name, 0)) + int(ns))

    def answered(self, job: str, chunk: int) -> list[tuple[int, int]] | None:
        """(first row, rows) of the parts of `chunk` published; None once it is complete (or purged)."""
        with self._cond:
            parts = self._jobs[job].parts.get(chunk, {}) if job in self._jobs else {-1: 0}
            return None if -1 in parts else sorted(parts.items())

    def arrivals(self, job: str, cursor: int) -> tuple[list[Any], int]:
        with self._cond:
            got = self._jobs[job].arrivals[cursor:] if job in self._jobs else []
            return got, cursor + len(got)

    def fetch(self, job: str, chunks: Sequence[Any]) -> list[bytes | None]:
        return [None if k is None else k.encode() for k in self._kept(job, chunks)]

    def fetch_results(self, job: str, chunks: Sequence[Any], decode: Decode = decode_solve) -> list[Any]:
        return self._kept(job, chunks)

    def stored(self, job: str, chunks: Sequence[Any]) -> list[bool]:
        return [k is not None for k in self._kept(job, chunks)]

    def job_ids(self, most: int) -> list[str]:
        with self._cond:
            return list(self._jobs)[:most]

    def created_at(self, jobs: Sequence[str]) -> dict[str, float]:
        with self._cond:
            metas = [(job, self._jobs[job].meta) for job in jobs if job in self._jobs]
            return {job: float(meta["created"]) for job, meta in metas if "created" in meta}

    def cancel(self, job: str) -> bool:
        """The job marked cancelled as in Redis (no stop key: this process's own pool runs its chunks)."""
        with self._cond:
            if job not in self._jobs or self._jobs[job].meta.get("cancelled"):
                return False
            self._jobs[job].meta.update(state="failed", error=CANCELLED, cancelled=f"{time.time():.3f}")
            self._cond.notify_all()
            return True

    def _kept(self, job: str, chunks: Sequence[Any]) -> list[Any]:
        with self._cond:
            if job not in self._jobs:
                return [None] * len(chunks)
            self._expire(self._jobs[job])
            return [self._jobs[job].results.get(c) for c in chunks]

    def mark_collected(self, job: str, chunks: Sequence[Any], ttl: int) -> None:
        """Drop collected results at once (ttl 0: a collector that will not read again), else keep
        them `ttl` seconds, so the job can be read again (`Job.results()` twice), as in Redis."""
        with self._cond:
            state = self._jobs.get(job)
            if state is None:
                return
            for c in chunks:
                if ttl <= 0:
                    state.results.pop(c, None)
                    state.expiry.pop(c, None)
                else:
                    state.expiry[c] = self._clock() + ttl
            self._expire(state)

    def _expire(self, state: _Job) -> None:
        """Drop the job's collected results whose time is up (under the lock)."""
        now = self._clock()
        for c in [c for c, at in state.expiry.items() if at <= now]:
            del state.expiry[c]
            state.results.pop(c, None)

    def stats(self, job: str) -> list[PartStats]:
        with self._cond:
            return list(self._jobs[job].stats.values()) if job in self._jobs else []

    def hint(self, job: str) -> tuple[int, float]:
        with self._cond:
            return self._jobs[job].hint if job in self._jobs else (0, 0.0)

    def wait(self, job: str, timeout: float) -> None:
        with self._cond:
            self._cond.wait(timeout)

    def wait_arrival(self, job: str, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait(timeout)

    def purge(self, job: str, *, stop: bool = True) -> int:
        with self._cond:
            self._tokens.pop(job, None)
            found = self._jobs.pop(job, None) is not None
            self._cond.notify_all()
            return int(found)

    def arrived_count(self, job: str) -> int:
        """How many chunks are answered whole (the producer's backpressure reads this)."""
        with self._cond:
            return self._jobs[job].done if job in self._jobs else 0
