"""`Job`: one job as `BatchClient` hands it over: its producer thread, its status, its records as they
arrive."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from client.collector import JobFailed, Slice, arrival_order, chunk_order, in_order, stream_chunks
from client.config import ClientSettings
from client.interrupts import held
from client.numbers import plural
from client.plan import Source
from client.store import JobStatus, JobStore, Superseded, job_cost, sent_bytes, split_words
from pipeline.engine.render.record import Record
from solvers.model.frame import need, to_pandas, to_polars

if TYPE_CHECKING:
    from client.dataset import Manifest
    from client.producer import Producer  # only named here: loading it loads numba
    from client.resend import Resender
    from client.summary import Summary
    from pipeline.contract.generate import GenerateResult, GenerateTask
    from pipeline.contract.part import Part

log = logging.getLogger(__name__)


class JobHost(Protocol):
    """What a Job reads of the `BatchClient` that made it (typed here: `client.batch` imports this module)."""

    settings: ClientSettings
    store: JobStore
    daemon: bool

    @property
    def embedded(self) -> bool: ...

    def resender(self, job_id: str) -> Resender | None: ...


class Destination(Protocol):
    """What `Job.write` writes into: `Output` (a file or stdout), `DatasetOutput`, the page's `Answer`."""

    def write(self, result: Part, start: int, stop: int) -> None: ...
    def durable(self) -> dict[str, Any]: ...
    def commit(self) -> Manifest | None: ...


@dataclass
class Written:
    """How far `Job.write` got (with an earlier collection's parts): a resumed collection goes on there."""

    parts: set[tuple[int, int]] | None = None  # an earlier collection's parts (None: a fresh target)
    rows: int = 0
    complete: bool = False
    manifest: Manifest | None = None


@dataclass
class Collected:
    """Chunks whose every row this process has taken: a solve's window counts them once it collects (Redis
    then holds only the chunks in flight and those waiting for this collector)."""

    on: bool = False
    chunks: int = 0
    _rows: dict[int, int] = field(default_factory=dict)

    def count(self, parts: Iterable[Any]) -> Iterator[Any]:
        """Pass the parts through, counting the chunks they complete."""
        for part in parts:
            stats = part.header.stats
            if stats.chunk >= 0:  # a chunk of no rows (a split owning no puzzle line): done by its part
                got = self._rows.get(stats.chunk, 0) + stats.n
                if got >= stats.chunk_n:
                    self._rows.pop(stats.chunk, None)
                    self.chunks += 1
                else:
                    self._rows[stats.chunk] = got
            yield part


@dataclass
class _Writing:
    """One `Job.write` in progress: the rows of each part still to write, the parts written whole since the
    last acknowledgement and when that was (what the next one drops from the store, and when it is due)."""

    job: str
    target: Destination
    store: JobStore
    settings: ClientSettings
    written: Written
    ordered: bool
    acked: bool  # parts leave the store once durable in the target
    left: dict[tuple[int, int], int] = field(default_factory=dict)  # rows of a part still to write
    pending: list[tuple[int, int]] = field(default_factory=list)  # parts written whole since the last ack
    moved: int = 0  # bytes of parts written
    since: tuple[float, int] = field(default_factory=lambda: (time.monotonic(), 0))  # last ack: when, moved

    def add(self, result: Part, start: int, stop: int, summary: Summary) -> None:
        """Write rows `start`..`stop` of a part into the target, the part's statistics into `summary` once (in
        order, a part may come in slices), and acknowledge what is due."""
        self.target.write(result, start, stop)
        self.written.rows += stop - start
        part = result.part
        left = self.left
        if part not in left:
            left[part] = len(result)
            self.moved += len(result.body) if result.body is not None else 0
            summary.add(result.header.stats, result.header.input)
        left[part] -= stop - start
        if not left[part]:
            del left[part]
            self.pending.append(part)
        self.ack()

    def ack(self, force: bool = False) -> None:
        """Make the target durable, then drop the parts in it from the store and record the checkpoint."""
        settings, since = self.settings, self.since
        due = time.monotonic() - since[0] >= settings.ack_s or self.moved - since[1] >= settings.ack_mb * 1e6
        if not self.acked or not (force or due):
            return
        point = self.target.durable()
        point.update(rows=self.written.rows, ordered=self.ordered)
        self.store.ack(self.job, self.pending, point)
        self.pending.clear()
        self.since = (time.monotonic(), self.moved)


class Job:
    """A submitted job: its id, its status, and its results as they arrive (a generate job: `generated`)."""

    def __init__(
        self,
        client: JobHost,
        job_id: str,
        producer: Producer | None,
        inputs: list[tuple[str, Source]] | Iterable[GenerateTask],
        *,
        taken: list[int] | None = None,
        collected: Collected | None = None,
    ) -> None:
        """`inputs`: a solve job's named inputs, or a generate job's tasks (`taken`: chunks `generated` handed
        over, for the window)."""
        self.client = client
        self.id = job_id
        self._error: BaseException | None = None
        self._done = threading.Event()  # the producer is done (not Thread.join: bpo-45274, decisions.md)
        self._producer = producer
        self._taken = taken
        self._collected = collected or Collected()
        self.note: str | None = None  # one line for the user about how the job runs (a command prints it)
        if producer is None:
            self._done.set()
        else:
            name, daemon = f"producer-{job_id}", client.daemon
            threading.Thread(target=self._produce, args=(producer, inputs), name=name, daemon=daemon).start()

    def _produce(self, producer: Producer, inputs: Iterable) -> None:
        """The producer thread: read and send the inputs (or the plan), keeping its error for the caller."""
        try:
            (producer.run_plan if self._taken is not None else producer.run)(inputs)
        except BaseException as exc:  # noqa: BLE001 - kept for wait_submitted(); the store says failed
            self._error = exc
        finally:
            self._done.set()

    def wait_submitted(self, timeout: float | None = None) -> None:
        """Block until every input line was read and sent; re-raise the producer's error."""
        self._done.wait(timeout)
        if self._error is not None:
            raise self._error

    @property
    def producer_error(self) -> BaseException | None:
        """What stopped this process's producer, once it has stopped on an error (None otherwise)."""
        return self._error

    @property
    def submitted_here(self) -> bool:
        """True when this process reads the job's input (submit, solve), False when it only collects."""
        return self._producer is not None

    @property
    def input_names(self) -> list[str]:
        """The job's inputs as this process submits them ([] when it only collects)."""
        return list(self._producer.spec.inputs) if self._producer is not None else []

    def stopped_at(self) -> int | None:
        """Puzzles this process's producer committed if it stopped short (None: it finished, none ran here,
        it was taken over, or it generates): known without the broker."""
        if self._producer is None or self._taken is not None or isinstance(self._error, Superseded):
            return None
        return self._producer.checkpoint.index if self.producing or self._error is not None else None

    def stopped_words(self) -> str | None:
        """How far this process's producer got if it stopped short (as `stopped_at`): `860,903 puzzles`, or `7
        splits (3.1 MB of 9.2 MB)`."""
        done = self.stopped_at()
        if done is None or self._producer is None:
            return None
        spec, checkpoint = self._producer.spec, self._producer.checkpoint
        if spec.splits is None:
            return plural(done, "puzzle")
        sizes = [p.size if p is not None else 0 for p in spec.prints]
        return split_words(checkpoint.chunks, sent_bytes(checkpoint, sizes), sum(sizes))

    @property
    def producing(self) -> bool:
        """True while this process's producer is still reading the input."""
        return not self._done.is_set()

    def status(self) -> JobStatus:
        """Progress, counts by status, rate and live workers."""
        return self.client.store.status(self.id)

    def cost(self) -> tuple[float, float]:
        """The workers' CPU seconds and chunks' wall seconds so far, read alone (for a dataset's manifest)."""
        return job_cost(self.id, self.client.store.meta(self.id))

    def chunks(
        self,
        ordered: bool = False,
        *,
        idle_timeout: float | None = None,
        on_wait: Callable[[], None] | None = None,
        keep: bool = True,
        acked: bool = False,
        written: tuple[set[Any], int] | None = None,
    ) -> Iterator[Slice]:
        """Stream (part, first row, end row) slices as results arrive, or in input order. `keep=False` deletes
        each once the caller has it; `acked`: the caller drops them once durable (`JobStore.ack`). `written`:
        the parts (and puzzles) an earlier collection wrote into the output this one goes on with."""
        parts, rows = written if written else (None, 0)
        ttl = -1 if acked else self.client.settings.result_ttl if keep else 0
        stream: Iterable = self._stream(
            result_ttl=ttl, idle_timeout=idle_timeout, on_wait=on_wait, written=parts, rows_written=rows
        )
        self._collected.on = True  # the producer's window now waits for what this process collects
        stream = self._collected.count(stream)
        yield from in_order(stream, rows) if ordered else arrival_order(stream)

    def generated(self, *, on_wait: Callable[[], None] | None = None) -> Iterator[GenerateResult]:
        """Stream a generate job's chunk results in plan order, each once and dropped once read (RuntimeError
        for a chunk that failed)."""
        from pipeline.contract.generate import GenerateResult

        stream = self._stream(result_ttl=0, on_wait=on_wait, decode=GenerateResult.decode)
        for result in chunk_order(stream):
            if result.error:
                raise RuntimeError(f"chunk {result.header.chunk}: {result.error}")
            if self._taken is not None:
                self._taken[0] += 1
            yield result

    def _stream(self, **options: Any) -> Iterator[Any]:
        """`stream_chunks` of this job with the client's settings and resend sweep (`options`: the rest)."""
        s, resender = self.client.settings, self.client.resender(self.id)
        return stream_chunks(
            self.client.store,
            self.id,
            poll=s.poll_interval,
            stale_after=s.producer_stale_s,
            sweep=resender.sweep if resender is not None else None,
            producer_alive=lambda: self.producing,
            **options,
        )

    def results(self, ordered: bool = False, *, keep: bool = True) -> Iterator[Record]:
        """Stream one Record per input puzzle, as they arrive (or in input order); readable again for
        `result_ttl` s (embedded: in memory until then or `purge()`); `keep=False` drops each as read."""
        self._refuse_dataset("Job.results()")
        for result, start, stop in self.chunks(ordered, keep=keep):
            if result.columns is not None:  # read from the columns as they are: no JSON text
                index, line = result.row_indices()[start:stop], result.row_lines()[start:stop]
                yield from Record.rows(result.columns.slice(start, stop), result.header.input, index, line)
                continue
            for text in result.lines()[start:stop]:
                yield Record.from_json(text)

    def to_arrow(self, ordered: bool = True, *, keep: bool = True) -> Any:
        """Every record of the job as one Arrow table once every puzzle is answered, with the Parquet output's
        fields and types (`pip install 'sudoku-batch[parquet]'`), read from the parts as stored
        (`client.frame`)."""
        return self._table("Job.to_arrow()", ordered, keep, "parquet")

    def to_pandas(self, ordered: bool = True, *, keep: bool = True) -> Any:
        """Every record of the job as a pandas DataFrame, as `pandas.read_parquet` reads the Parquet output
        (`pip install 'sudoku-batch[dataframe]'`)."""
        return to_pandas(self._table("Job.to_pandas()", ordered, keep, "dataframe", "pandas"))

    def to_polars(self, ordered: bool = True, *, keep: bool = True) -> Any:
        """Every record of the job as a polars DataFrame (`pip install 'sudoku-batch[polars]'`)."""
        return to_polars(self._table("Job.to_polars()", ordered, keep, "polars", "polars"))

    def _table(self, what: str, ordered: bool, keep: bool, extra: str, *modules: str) -> Any:
        """The job's records as an Arrow table once `modules` and pyarrow import (checked before keep=False
        drops a part); ValueError (one line) for a generate job or a dataset's."""
        from client.frame import slices_table

        for module in (*modules, "pyarrow"):
            need(module, what, extra)
        if self._taken is not None or self.client.store.meta(self.id).get("kind") == "generate":
            raise ValueError(f"{what}: job {self.id} generates puzzles; read them with Job.generated()")
        self._refuse_dataset(what)
        return slices_table(self.chunks(ordered, keep=keep))

    def write(
        self,
        target: Destination,
        summary: Summary,
        written: Written | None = None,
        *,
        ordered: bool = False,
        keep: bool = True,
        acked: bool = False,
        idle_timeout: float | None = None,
        on_wait: Callable[[], None] | None = None,
        on_write: Callable[[], None] | None = None,
    ) -> Written:
        """Write every record of the job into `target`, each part's statistics into `summary` once; JobFailed
        (one line) when records are missing at the end. `written`: how far an earlier collection got, kept up
        to date. `acked`: parts leave the store once durable in the target (every `ack_s` or `ack_mb`, at the
        end, at an interrupt: `JobStore.ack`). `on_write`: after a slice; the rest: as `chunks`."""
        written = written if written is not None else Written()
        store = self.client.store
        writing = _Writing(self.id, target, store, self.client.settings, written, ordered, acked)
        done = (written.parts, written.rows) if written.parts is not None else None
        chunks = self.chunks(
            ordered, idle_timeout=idle_timeout, on_wait=on_wait, keep=keep, acked=acked, written=done
        )
        try:
            for result, start, stop in chunks:
                with held():  # an interrupt waits for the slice's records to be written whole
                    writing.add(result, start, stop, summary)
                if on_write is not None:
                    on_write()
            self.wait_submitted()
            expected = int(store.meta(self.id).get("total", written.rows))
            if written.rows != expected:
                raise JobFailed(f"{expected - written.rows} of {expected} results are missing")
            written.complete = True
            with held():
                writing.ack(force=True)
        except KeyboardInterrupt:
            try:
                writing.ack(force=True)
            except Exception as exc:  # noqa: BLE001 - the broker may be what was interrupted: the output is kept
                log.debug("job %s: the parts written were not acknowledged: %s", self.id, exc)
            raise
        written.manifest = target.commit()
        return written

    def commit(self, *, on_wait: Callable[[], None] | None = None) -> Manifest:
        """Wait for every part of a dataset job, commit the dataset (`_manifest.json`, `_SUCCESS`) and return
        its manifest, as `collect JOB -o DIR/` does; ValueError without a dataset, JobFailed when lines are
        missing."""
        from client.dataset import DatasetOutput
        from client.summary import Summary

        meta = self.client.store.meta(self.id)
        dataset = meta.get("dataset")
        if not dataset:
            raise ValueError(f"Job.commit(): job {self.id} writes no dataset: read it with Job.results()")
        summary, fmt = Summary(), meta.get("format", "jsonl")
        try:
            output = DatasetOutput(dataset, fmt, self.id, meta, summary, cost=self.cost)
            written = self.write(output, summary, on_wait=on_wait)
        except JobFailed as exc:
            raise JobFailed(f"job {self.id}: {exc}: not committed") from None
        return written.manifest  # type: ignore[return-value]  # a dataset's commit returns its manifest

    def _refuse_dataset(self, what: str) -> None:
        """ValueError, one line, for a job whose records are part files in a dataset (not in its parts)."""
        dataset = self.client.store.meta(self.id).get("dataset")
        if dataset:
            where = f"{what}: job {self.id} writes a dataset to {dataset}/"
            raise ValueError(f"{where}: read it there (pandas, pyarrow, DuckDB)")

    def cancel(self, *, fail: bool = True, wait: float = 30.0) -> bool:
        """Stop the job's solving (`JobStore.cancel`) and this process's reading (waiting at most `wait` s),
        results kept; True if this call cancelled it. `fail=False`: only this process's producer stops
        (resumable)."""
        cancelled = self.client.store.cancel(self.id) if fail else False
        self.stop_reading(fail=fail, wait=wait)
        return cancelled

    def stop_reading(self, *, fail: bool = True, wait: float = 30.0) -> None:
        """Stop only this process's reading of the input (waiting at most `wait` s): a failed collection's
        producer must not run on. `fail` as in `cancel`."""
        if self._producer is None:
            return
        self._producer.stop(fail)
        if not self._done.wait(wait) and not fail:  # still blocked in a read or a send: it has left anyway
            self._producer.leave()

    def purge(self, *, stop: bool = True) -> int:
        """Delete the job's data from the store; `stop` first tells workers still at it to stop (broker)."""
        return self.client.store.purge(self.id, stop=stop)
