"""The collector: stream a job's chunk results as they arrive, optionally back in input order (each read once:
every run reads the arrival list from the start and skips ids it has seen)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from client.store import Decode, JobStore, decode_solve, submitted_words
from pipeline.contract.part import Part, VersionMismatch
from pipeline.contract.tasks import VERSION, version_refusal

FETCH_CHUNKS = 1  # chunk results fetched per round trip (each can be tens of MB)
META_S = 0.5  # a collector with nothing arriving reads the job's metadata (failed? complete?) this often


class JobFailed(RuntimeError):
    """The job cannot finish: the message says why."""


def stream_chunks(
    store: JobStore,
    job: str,
    *,
    result_ttl: int,
    poll: float = 0.05,
    stale_after: float = 120.0,
    idle_timeout: float | None = None,
    on_wait: Callable[[], None] | None = None,
    sweep: Callable[[float], object] | None = None,
    decode: Decode = decode_solve,
    written: set[Any] | None = None,
    rows_written: int = 0,
    producer_alive: Callable[[], bool] | None = None,
) -> Iterator[Any]:
    """Yield each chunk result of `job` once, in arrival order, until the job is complete: kept `result_ttl` s
    (0: deleted at once; < 0: the caller acks them). JobFailed when the job failed (cancelled: after every
    part it holds), its producer died, a result expired, or nothing arrived for `idle_timeout` s. `sweep` gets
    the seconds since the last arrival (`Resender.sweep`); `written`: parts an earlier collection wrote
    (skipped, their `rows_written` counted)."""
    state = _Collection(store, job, set(written or ()), rows_written)
    while True:
        ids, state.cursor = store.arrivals(job, state.cursor)
        fresh = [c for c in dict.fromkeys(ids) if c not in state.seen]
        if fresh:
            yield from state.take(fresh, decode, result_ttl)
            continue
        if time.monotonic() >= state.meta_due:  # parts arrived, or META_S passed: the job may have completed
            said = state.read_meta(stale_after, idle_timeout, producer_alive)
            if said is _Said.COMPLETE:
                return
            if said is _Said.LOOK_AGAIN:
                continue
        if on_wait is not None:
            on_wait()
        if sweep is not None:
            sweep(time.monotonic() - state.last_progress)
        if store.wait_arrival(job, max(poll, META_S) if poll > 0 else 0):  # an arrival, or a change of state
            state.meta_due = 0.0


class _Said(Enum):
    """What the job's metadata told a collection: it is complete, read its arrivals once more (a cancelled
    job: a part published just before the cancel), or wait for more."""

    COMPLETE = "complete"
    LOOK_AGAIN = "look again"
    WAIT = "wait"


@dataclass
class _Collection:
    """One `stream_chunks` run: the parts seen and the rows they answer, where it is in the arrival list,
    and when it last progressed and reads the metadata next (the state its steps share)."""

    store: JobStore
    job: str
    seen: set[Any]
    rows: int  # puzzles answered by the parts seen (a generate run: chunks seen)
    cursor: int = 0
    last_progress: float = field(default_factory=time.monotonic)
    meta_due: float = 0.0  # when the job's metadata is read next (at once after parts arrived)
    last_look: bool = False  # a cancelled job's arrivals read once more after its cancel was seen

    def take(self, fresh: list[Any], decode: Decode, result_ttl: int) -> Iterator[Any]:
        """Yield the results of `fresh` (arrived, not seen), a few at a time (bounded memory), each marked
        collected once the caller has written it (`result_ttl` < 0: the caller acks them); JobFailed for one
        that expired."""
        store, job = self.store, self.job
        self.meta_due = 0.0
        for at in range(0, len(fresh), FETCH_CHUNKS):  # a few parts at a time: bounded memory
            part = fresh[at : at + FETCH_CHUNKS]
            for name, result in zip(part, _fetched(store, job, part, decode), strict=True):
                if result is None:
                    what = f"{name[0]} (rows from {name[1]})" if isinstance(name, tuple) else name
                    raise JobFailed(f"the result of chunk {what} expired before it was collected")
                self.seen.add(name)
                self.rows += len(result) if isinstance(name, tuple) else 1
                yield result
            if result_ttl >= 0:
                store.mark_collected(job, part, result_ttl)  # after the caller has written them
        self.last_progress = time.monotonic()

    def read_meta(
        self, stale_after: float, idle_timeout: float | None, producer_alive: Callable[[], bool] | None
    ) -> _Said:
        """What the job's metadata says (read again after META_S); JobFailed when the job failed, is gone, its
        producer stopped beating, or nothing arrived for `idle_timeout` s."""
        self.meta_due = time.monotonic() + META_S
        meta = self.store.meta(self.job)
        if not meta or "created" not in meta:
            raise JobFailed(f"no job {self.job} (never created, purged, or expired)")
        state = meta.get("state")
        if state == "failed":
            if meta.get("cancelled") and not self.last_look:  # a part published just before it: read it
                self.last_look = True
                return _Said.LOOK_AGAIN
            raise JobFailed(meta.get("error") or "the job failed")
        want = self.wanted(meta, state)
        if state == "produced" and self.rows >= want:
            return _Said.COMPLETE
        local = producer_alive is not None and producer_alive()
        if state == "producing" and not local:  # not complete until the producer says so
            beat = float(meta.get("producer_beat") or meta["created"])
            if time.time() - beat > stale_after:
                done = submitted_words(meta)
                raise JobFailed(f"the producer stopped after submitting {done}, not the whole input")
        if idle_timeout is not None and time.monotonic() - self.last_progress > idle_timeout:
            raise JobFailed(f"no result arrived for {idle_timeout:g} s")
        return _Said.WAIT

    def wanted(self, meta: dict[str, str], state: str | None) -> int:
        """The rows (a generate job: chunks) the job answers in all; a job read in splits has its total once
        produced and the workers counted every split (stored then), one more than seen until then."""
        want = int(meta.get("chunks_total" if meta.get("kind") == "generate" else "total", 0))
        if state == "produced" and meta.get("splits") and "total" not in meta:  # read in splits
            total = self.store.split_total(self.job)  # known once the workers counted every split
            if total is None:
                return self.rows + 1  # not yet
            self.store.update(self.job, {"total": str(total), "submitted": str(total)})
            want = total
        return want


def _fetched(store: JobStore, job: str, names: list[Any], decode: Decode) -> list[Any]:
    """The results of `names`; a result of another protocol version ends the job in one line naming both."""
    for name in names:
        if decode is decode_solve and not isinstance(name, tuple):
            raise JobFailed(
                version_refusal(f"the worker of chunk {job}:{name}", VERSION - 1, "client") or "version"
            )
    try:
        return store.fetch_results(job, names, decode)
    except VersionMismatch as exc:
        raise JobFailed(f"{exc}: run one version of sudoku-batch on the clients and the workers") from None


Slice = tuple[Part, int, int]  # a part and a range of its record rows


def in_order(chunks: Iterable[Part], expected: int = 0) -> Iterator[Slice]:
    """Reorder chunk results by puzzle index from `expected` on, holding only what arrived ahead of its turn
    (run by run of consecutive indices: results arriving in order pass straight through)."""
    heads: dict[int, tuple[Part, int, int]] = {}  # next index -> (result, run number, first row)
    for result in chunks:
        if len(result) == 0:
            continue
        heads[result.header.index_runs[0][0]] = (result, 0, 0)
        while expected in heads:
            result, run, row = heads.pop(expected)
            runs = result.header.index_runs
            start = row
            while run < len(runs) and runs[run][0] == expected:
                expected += runs[run][1]
                row += runs[run][1]
                run += 1
            yield result, start, row
            if run < len(runs):
                heads[runs[run][0]] = (result, run, row)
    if heads:
        raise JobFailed(f"results are missing for puzzles from index {expected} on")


def arrival_order(chunks: Iterable[Part]) -> Iterator[Slice]:
    """Pass chunk results through whole, as they arrive."""
    for result in chunks:
        yield result, 0, len(result)


def chunk_order(chunks: Iterable[Any]) -> Iterator[Any]:
    """Reorder chunk results by chunk number (a generate plan's order), holding only what arrived early."""
    expected = 0
    early: dict[int, Any] = {}
    for result in chunks:
        early[result.header.chunk] = result
        while expected in early:
            yield early.pop(expected)
            expected += 1
    if early:
        raise JobFailed(f"results are missing for chunks from {expected} on")
