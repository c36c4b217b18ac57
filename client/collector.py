"""The collector: stream a job's chunk results as they arrive, optionally back in input order (each read once:
every run reads the arrival list from the start and skips ids it has seen)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
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
    seen: set[Any] = set(written or ())
    rows = rows_written  # puzzles answered by the parts seen (a generate run: chunks seen)
    cursor = 0
    last_progress = time.monotonic()
    meta_due = 0.0  # when the job's metadata is read next (at once after parts arrived)
    last_look = False  # a cancelled job's arrivals read once more after its cancel was seen
    while True:
        ids, cursor = store.arrivals(job, cursor)
        fresh = [c for c in dict.fromkeys(ids) if c not in seen]
        if fresh:
            meta_due = 0.0
            for at in range(0, len(fresh), FETCH_CHUNKS):  # a few parts at a time: bounded memory
                part = fresh[at : at + FETCH_CHUNKS]
                for name, result in zip(part, _fetched(store, job, part, decode), strict=True):
                    if result is None:
                        what = f"{name[0]} (rows from {name[1]})" if isinstance(name, tuple) else name
                        raise JobFailed(f"the result of chunk {what} expired before it was collected")
                    seen.add(name)
                    rows += len(result) if isinstance(name, tuple) else 1
                    yield result
                if result_ttl >= 0:
                    store.mark_collected(job, part, result_ttl)  # after the caller has written them
            last_progress = time.monotonic()
            continue
        if time.monotonic() >= meta_due:  # parts arrived, or META_S passed: the job may have completed
            meta_due = time.monotonic() + META_S
            meta = store.meta(job)
            if not meta or "created" not in meta:
                raise JobFailed(f"no job {job} (never created, purged, or expired)")
            state = meta.get("state")
            if state == "failed":
                if meta.get("cancelled") and not last_look:  # a part published just before it: read it
                    last_look = True
                    continue
                raise JobFailed(meta.get("error") or "the job failed")
            want = int(meta.get("chunks_total" if meta.get("kind") == "generate" else "total", 0))
            if state == "produced" and meta.get("splits") and "total" not in meta:  # read in splits
                total = store.split_total(job)  # known once the workers counted every split
                if total is None:
                    want = rows + 1  # not yet
                else:
                    store.update(job, {"total": str(total), "submitted": str(total)})
                    want = total
            if state == "produced" and rows >= want:
                return
            local = producer_alive is not None and producer_alive()
            if state == "producing" and not local:  # not complete until the producer says so
                beat = float(meta.get("producer_beat") or meta["created"])
                if time.time() - beat > stale_after:
                    done = submitted_words(meta)
                    raise JobFailed(f"the producer stopped after submitting {done}, not the whole input")
            if idle_timeout is not None and time.monotonic() - last_progress > idle_timeout:
                raise JobFailed(f"no result arrived for {idle_timeout:g} s")
        if on_wait is not None:
            on_wait()
        if sweep is not None:
            sweep(time.monotonic() - last_progress)
        if store.wait_arrival(job, max(poll, META_S) if poll > 0 else 0):  # an arrival, or a change of state
            meta_due = 0.0


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
