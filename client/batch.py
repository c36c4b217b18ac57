"""`BatchClient` and `Job`: the Python face of the pipeline, for scripts, notebooks and the CLI.

    job = BatchClient("redis://host:6379/0").submit("corpus.txt", time_limit=5, portfolio="race")
    for record in job.results(): ...

With no broker (argument or `SUDOKU_BATCH_BROKER`) the job runs embedded: the same
producer, chunk function and collector, with local processes and an in-memory store.
"""

from __future__ import annotations

import io
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from client.collector import JobFailed, Slice, arrival_order, chunk_order, in_order, stream_chunks
from client.config import ClientSettings, check_broker_url
from client.dataset import check_directory, claim_directory, claim_lives, dataset_url
from client.interrupts import held
from client.numbers import plural
from client.pool import LocalPool, default_workers, max_workers, warm_solvers
from client.producer import (
    JobSpec,
    Producer,
    ResumeRefused,
    Source,
    check_writable,
    fingerprint,
    fleet_roots,
    new_job_id,
    split_plan,
)
from client.store import (
    Checkpoint,
    JobStatus,
    JobStore,
    MemoryStore,
    Superseded,
    sent_bytes,
    split_words,
    submission_state,
)
from client.transport import INLINE_BYTES, CeleryTransport, LocalTransport, Transport
from pipeline.contract.formats import COMPRESSIONS, FORMATS, OUTPUTS, zstd_codec
from pipeline.contract.keys import KEY_PREFIX
from pipeline.contract.outbox import parse_task
from pipeline.contract.tasks import (
    DEFAULT_ESCALATE_AFTER_S,
    DEFAULT_TIME_LIMIT_S,
    MAX_ESCALATE_AFTER_S,
    MAX_NAME_CHARS,
    MAX_TIME_LIMIT_S,
)
from pipeline.engine.dataset import Claim
from pipeline.engine.inputs import check_column, peek_stdin
from pipeline.engine.render.record import Record
from solvers.model.frame import need, to_pandas, to_polars
from solvers.model.puzzle import as_box

if TYPE_CHECKING:
    from client.dataset import DatasetOutput, Manifest
    from client.output import Output
    from client.redis_store import RedisJobStore
    from client.resend import Resender
    from client.summary import Summary
    from pipeline.contract.generate import GenerateOptions, GenerateResult, GenerateTask
    from solvers.model.puzzle import Box


class BatchClient:
    """Submits corpora as jobs and attaches to existing ones; embedded when there is no broker."""

    def __init__(
        self,
        broker_url: str | None = None,
        *,
        workers: int | None = None,
        settings: ClientSettings | None = None,
        daemon: bool = False,
    ) -> None:
        """`daemon`: producer threads do not keep the process alive (the CLI: a failure or an interrupt
        ends the command at once; a script that only submits then waits with `Job.wait_submitted`)."""
        self.settings = settings or ClientSettings()
        self.daemon = daemon
        url = broker_url if broker_url is not None else self.settings.broker
        self.url = url or None
        self.workers = workers or min(default_workers(), max_workers())
        self.pool = LocalPool(self.workers)
        self._celery: CeleryTransport | None = None
        self._live: tuple[float, int] = (0.0, 0)
        if self.url:
            from client.redis_store import RedisJobStore, connect

            check_broker_url(self.url)
            self.store: JobStore = RedisJobStore(connect(self.url, self.settings), self.settings)
        else:
            self.store = MemoryStore()

    @property
    def embedded(self) -> bool:
        """True when jobs run in local processes (no broker)."""
        return self.url is None

    def submit(
        self,
        source: Source,
        *,
        time_limit: float | None = DEFAULT_TIME_LIMIT_S,
        portfolio: str | None = None,
        box: str | None = None,
        name: str | None = None,
        seed: int | None = None,
        escalate_after: float = DEFAULT_ESCALATE_AFTER_S,
        format: str = "columns",
        dataset: str | None = None,
        compression: str = "none",
        splits: bool | None = None,
        column: str | None = None,
    ) -> Job:
        """Start a job over a path (`-` for stdin, `.gz` accepted) or an iterable of puzzle strings.

        `time_limit`: seconds per puzzle (DEFAULT_TIME_LIMIT_S, 20; None or 0: no limit, as before
        there was a default: a hard puzzle may then run for ever). `seed` fixes the solvers' seeds
        (the same seed, the same random choices); None draws them from the job id, so every job
        tries differently. A puzzle still unanswered after
        `escalate_after` seconds is escalated: idle workers (or local processes) search it too, each with
        another seed; 0 never. `dataset`, `compression`, `splits`, `column`: see `submit_inputs`.
        """
        if name is None:
            name = str(source) if isinstance(source, (str, Path)) else "<strings>"
        return self.submit_inputs(
            [(name, source)], time_limit=time_limit, portfolio=portfolio, box=box, seed=seed,
            escalate_after=escalate_after, format=format, dataset=dataset, compression=compression,
            splits=splits, column=column,
        )  # fmt: skip

    def submit_inputs(
        self,
        inputs: list[tuple[str, Source]],
        *,
        time_limit: float | None = DEFAULT_TIME_LIMIT_S,
        portfolio: str | None = None,
        box: str | None = None,
        bounded: bool = True,
        seed: int | None = None,
        escalate_after: float = DEFAULT_ESCALATE_AFTER_S,
        format: str = "columns",
        dataset: str | None = None,
        compression: str = "none",
        splits: bool | None = None,
        column: str | None = None,
    ) -> Job:
        """Start a job over several named inputs, read in order in a background thread.

        `bounded` keeps a window of chunks in flight (memory and queue stay small while
        someone collects); `submit` without a collector needs it off. `time_limit` as in `submit`.
        `format` is what the processes that solve the chunks render the records in (`jsonl`, `csv`,
        `parquet`: a collector then moves their bytes into its output without reading them;
        `columns`, the default: the result columns, which `Job.results()` and any output format read).
        `dataset`: a directory (path or URL) the solving processes write the records to as part files
        (`pipeline.engine.dataset`; `format` jsonl, csv or parquet, `compression` none, gzip or zstd for the
        first
        two), committed by whoever collects the job; the job owns it until then (`DirectoryClaimed`, a
        ValueError naming the owner, while another job does); with a broker, a directory outside the data
        roots of a live worker (`sudoku-batch worker --data-root`) is a ValueError. `splits`: with a broker
        and a dataset, the workers read plain file inputs themselves in byte ranges (None: whenever every
        input allows it and lies under the data roots of every live worker, else this machine reads them
        and `Job.note` says so; False: never; True: or a ValueError saying why not). `column`: the header's
        name of a CSV input's puzzle column (None: the first of `solvers.model.parse.PUZZLE_COLUMNS` a header
        names; an input without such a header is read as plain lines); a file whose first line does not
        name `column` is a ValueError.
        """
        if format not in FORMATS:
            raise ValueError(f"format {format!r}: use one of {', '.join(FORMATS)}")
        url, split_urls, note = self._dataset_plan(inputs, dataset, format, compression, splits, box)
        as_box(box)  # a bad box shape is the caller's error, raised here
        if time_limit is not None and not 0 <= time_limit <= MAX_TIME_LIMIT_S:  # false for nan too
            raise ValueError(
                f"time_limit {time_limit:g}: must be 0 (no limit) or above, at most {MAX_TIME_LIMIT_S:g} s"
            )
        time_limit = time_limit or None  # 0: no limit
        if seed is not None and not 0 <= seed < MAX_SEED:
            raise ValueError(f"seed {seed}: must be at least 0 and below 2**63")
        if not 0 <= escalate_after <= MAX_ESCALATE_AFTER_S:  # false for nan too
            raise ValueError(
                f"escalate_after {escalate_after:g}: must be 0 (never) to {MAX_ESCALATE_AFTER_S:g} s"
            )
        if self.embedded:
            _check_portfolio(portfolio)
        prints = [fingerprint(src) for _, src in inputs] if not self.embedded else []
        names = [n for n, _ in inputs]
        _check_column(inputs, column)
        spec = JobSpec(
            new_job_id(), names, box, time_limit, portfolio, prints, seed, escalate_after or None,
            format, url, compression, split_urls, column,
        )  # fmt: skip
        inputs = [(name, _stdin() if isinstance(src, str) and src == "-" else src) for name, src in inputs]
        self.store.create(spec.job, spec.meta())
        if url is not None:
            self._claim(url, spec.job)
        transport: Transport
        if self.embedded:
            if not _small(inputs, escalate=bool(escalate_after) and self.workers > 1):
                self.pool.start()  # here, before the producer thread exists: the pool is forked
            else:
                warm_solvers()  # what the pool's processes load: a later job or command compiles no more
            transport = LocalTransport(self.store, spec.job, self.pool)
            window: Callable[[], int] | None = lambda: 2 * self.workers + 2  # noqa: E731
        else:
            transport = self._celery_transport()
            window = self._broker_window if bounded else None
        collected = _Collected()
        consumed = lambda: collected.chunks if collected.on else self.store.arrived_count(spec.job)  # noqa: E731
        producer = Producer(spec, self.store, transport, self.settings, window, consumed=consumed)
        job = Job(self, spec.job, producer, inputs, collected=collected)
        job.note = note
        return job

    def _claim(self, url: str, job: str) -> None:
        """Make `job` the one owner of its dataset directory (`client.dataset.claim_directory`: after the job
        exists in the store, so another client sees it lives); a job refused leaves the store again."""
        claim = Claim(
            job=job,
            broker=self._broker_place(),
            host=socket.gethostname(),
            pid=os.getpid(),
            claimed=time.time(),
        )
        try:
            claim_directory(
                url, claim, lambda held: claim_lives(held, self.store.meta(held.job), claim.broker)
            )
        except BaseException:
            self.store.purge(job, stop=False)
            raise

    def _broker_place(self) -> str:
        """Where this client's jobs live, without credentials (`host:port/db`, and a key prefix not the
        default); "" embedded."""
        if self.url is None:
            return ""
        parts = urlsplit(self.url)
        place = f"{parts.hostname}:{parts.port or 6379}/{parts.path.strip('/') or '0'}"
        prefix = self.settings.key_prefix
        return place if prefix == KEY_PREFIX else f"{place} prefix {prefix}"

    def _dataset_plan(
        self,
        inputs: list[tuple[str, Source]],
        dataset: str | None,
        format: str,
        compression: str,
        splits: bool | None,
        box: str | None,
    ) -> tuple[str | None, list[str] | None, str | None]:
        """The dataset's directory (checked, made ready), the inputs the workers read in splits, if any, and a
        note when this machine reads them because the live workers' data roots do not hold them; ValueError
        (one line) for options that do not go together, or a dataset outside a live worker's data roots."""
        if dataset is None:
            if splits:
                raise ValueError("splits need a dataset output (a directory: -o DIR/)")
            if compression != "none":
                raise ValueError(
                    "compression applies to a dataset's parts (-o DIR/); name a file .gz instead"
                )
            return None, None, None
        if format not in OUTPUTS:
            raise ValueError(f"a dataset's format is one of {', '.join(OUTPUTS)}, not {format!r}")
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression {compression!r}: use one of {', '.join(COMPRESSIONS)}")
        if compression == "zstd" and FORMATS[format].lines:
            zstd_codec()
        if format == "parquet":
            from pipeline.engine.render.parquet import INSTALL_HINT, installed

            if not installed():
                raise ValueError(f"Parquet needs pyarrow: {INSTALL_HINT}")
        url = dataset_url(dataset)
        if self.embedded:
            if splits:
                raise ValueError("splits need a broker: local processes read what this process reads")
            check_directory(url)
            return url, None, None
        fleet = fleet_roots(self._redis_store().worker_roots())
        check_writable(fleet, url)  # before the directory is touched: a dataset there stays as it is
        check_directory(url)
        if splits is False:
            return url, None, None
        urls, note = split_plan(inputs, box, splits, fleet)
        return url, urls, note

    def resume(
        self,
        job_id: str,
        sources: Sequence[Source] | None = None,
        *,
        time_limit: float | None = None,
        portfolio: str | None = None,
        box: str | None = None,
        bounded: bool = True,
        column: str | None = None,
    ) -> Job:
        """Go on submitting a job whose producer died or failed half way, from its last checkpoint.

        `sources` are the job's inputs again, in order (paths, `-`, or iterables of puzzle
        strings; None reopens the recorded paths); options, when given, must be the job's.
        Raises ResumeRefused (a ValueError, one line) when the job is gone or complete, its
        producer still beats, or the inputs differ (file size and first MB; then the puzzle
        before the checkpoint). A producer still running is fenced off (`JobStore.claim`).
        """
        if self.embedded:
            raise ResumeRefused("resuming needs a broker: an embedded job lives and dies with its process")
        meta = self.store.meta(job_id)
        spec = _resumable(job_id, meta)
        given = {"time_limit": time_limit, "portfolio": portfolio, "box": box, "column": column}
        for key, value in given.items():
            if value is not None and value != getattr(spec, key):
                raise ResumeRefused(
                    f"job {job_id} was submitted with {key} {getattr(spec, key)}, not {value}: "
                    "a resume keeps the job's options"
                )
        if sources is None:
            sources = list(spec.splits) if spec.splits is not None else _recorded(spec)
        if len(sources) != len(spec.inputs):
            raise ResumeRefused(
                f"job {job_id} has {len(spec.inputs)} inputs ({', '.join(spec.inputs)}), not {len(sources)}"
            )
        for name, was, src in zip(spec.inputs, spec.prints, sources, strict=True):
            if was is not None and fingerprint(src) != was:
                raise ResumeRefused(f"{src}: not the input submitted as {name} (size or first MB differ)")
        inputs = [
            (n, _stdin() if isinstance(s, str) and s == "-" else s)
            for n, s in zip(spec.inputs, sources, strict=True)
        ]
        token = self.store.claim(job_id)  # first: an old producer can no longer move the checkpoint read next
        meta = self.store.meta(job_id)
        if meta.get("state") == "produced":  # its producer finished just before the claim
            raise ResumeRefused(f"job {job_id} was submitted completely: nothing to resume (collect it)")
        checkpoint = Checkpoint.of(meta)
        self._send_unsent(job_id, checkpoint)
        window = self._broker_window if bounded else None
        producer = Producer(
            spec, self.store, self._celery_transport(), self.settings, window, resume=checkpoint, token=token
        )
        return Job(self, job_id, producer, inputs)

    def _send_unsent(self, job_id: str, checkpoint: Checkpoint) -> None:
        """Send the last task before the checkpoint again if it has no result: a killed producer may not have.

        If it was sent after all, it is solved twice and answered once (results are idempotent).
        """
        kept = self._redis_store().outbox(job_id).get(checkpoint.chunks - 1)
        if kept is not None:
            self._celery_transport().send(parse_task(kept[1]))

    def generate(
        self, box: Box, plan: list[tuple[int, int, int]], options: GenerateOptions, meta: dict[str, str]
    ) -> Job:
        """Start a generate job: one task per planned chunk `(index, count, seed)`, results in plan order.

        The same producer, transport, window, resend sweep and collector as a solve job: the
        chunks go to local processes (warmed for the generator) or to the workers. The window
        counts chunks the caller has taken (`Job.generated`), so chunks arriving early wait
        in bounded memory.
        """
        from functools import partial

        from pipeline.contract.generate import GenerateTask
        from pipeline.contract.generate import warm as warm_generator

        spec = JobSpec(new_job_id(), [])
        shape = f"{box.rows}x{box.cols}"
        tasks = (
            GenerateTask(job=spec.job, chunk=i, box=shape, count=count, seed=seed, options=options)
            for i, count, seed in plan
        )
        self.store.create(
            spec.job, {"kind": "generate", "state": "producing", **meta, "created": f"{time.time():.6f}"}
        )
        transport: Transport
        if self.embedded:
            if self.workers > 1:
                self.pool.start(partial(warm_generator, box), races=False)
            transport = LocalTransport(self.store, spec.job, self.pool)
            window: Callable[[], int] = lambda: 2 * self.workers  # noqa: E731
        else:
            transport = self._celery_transport()
            window = self._broker_window
        taken = [0]
        producer = Producer(spec, self.store, transport, self.settings, window, consumed=lambda: taken[0])
        return Job(self, spec.job, producer, tasks, taken=taken)

    def job(self, job_id: str) -> Job:
        """Attach to an existing job (broker mode: from any machine)."""
        return Job(self, job_id, None, [])

    def _redis_store(self) -> RedisJobStore:
        """The broker's job store (broker mode only)."""
        from client.redis_store import RedisJobStore

        assert isinstance(self.store, RedisJobStore), "broker mode only"
        return self.store

    def resender(self, job_id: str) -> Resender | None:
        """The sweep that re-sends `job_id`'s lost chunk tasks (None when embedded: nothing can lose them)."""
        if self.embedded:
            return None
        from client.resend import Resender

        return Resender(self._redis_store(), job_id, self._celery_transport, self.settings.resend_after)

    def _celery_transport(self) -> CeleryTransport:
        if self._celery is None:
            self._celery = CeleryTransport(self.url, self.settings)  # type: ignore[arg-type]
        return self._celery

    def _broker_window(self) -> int:
        """Chunks in flight while solving through a broker: a few per live worker process."""
        checked, count = self._live
        if time.monotonic() - checked > 5.0:
            count = len(self.store.live_workers())
            self._live = (time.monotonic(), count)
        return max(4, 2 * count + 2)

    def kill(self) -> None:
        """Kill the local worker processes now, dropping the chunks they solve (an interrupted command)."""
        self.pool.kill()

    def close(self) -> None:
        """Stop the local worker processes and release the broker connection."""
        self.pool.close()
        if self._celery is not None:
            self._celery.close()
            self._celery = None

    def __enter__(self) -> BatchClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


log = logging.getLogger(__name__)
MAX_SEED = 2**63  # seeds are 63-bit: any one fits a JSON number and numpy's SeedSequence
SMALL_GRID_CHARS = 2 * 81 + 1  # the longest line of a 9x9 grid: 81 values with separators


@dataclass
class Written:
    """How far `Job.write` got: the parts and records in its target (with an earlier collection's), whether
    every record is there, and the manifest of the dataset it committed."""

    parts: set[tuple[int, int]] | None = None  # an earlier collection's parts (None: a fresh target)
    rows: int = 0
    complete: bool = False
    manifest: Manifest | None = None


class _Collected:
    """Chunks whose every row this process has taken (a solve's window counts them once it collects: Redis
    then holds the chunks in flight and those waiting for this collector, not all the workers answered)."""

    def __init__(self) -> None:
        self.on = False
        self.chunks = 0
        self._rows: dict[int, int] = {}

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


def _stdin() -> Source:
    """Stdin, peeked: a small input is read whole now (so the job can tell it is small)."""
    stream, _ = peek_stdin(INLINE_BYTES)
    return stream


def _small(inputs: list[tuple[str, Source]], escalate: bool = True) -> bool:
    """True when solving in-process beats starting the pool: the inputs are known to total at
    most INLINE_BYTES and hold only lines short enough for 9x9 grids (a few 25x25 grids fit in
    those bytes too, but each may take seconds: they get the pool), or one puzzle of any size when
    no escalation could hand it to the pool's idle processes (`escalate` False)."""
    texts: list[str] = []
    for _, src in inputs:
        if isinstance(src, (str, Path)):
            try:
                with open(src, "rb") as f:
                    texts.append(f.read(INLINE_BYTES + 1).decode("utf-8", "replace"))
            except OSError:
                return False
        elif isinstance(src, io.BytesIO):
            texts.append(bytes(src.getbuffer()[: INLINE_BYTES + 1]).decode("utf-8", "replace"))
        elif isinstance(src, Sequence) and len(src) <= INLINE_BYTES:
            texts.append("".join(f"{t}\n" for t in src))
        else:
            return False
    if sum(map(len, texts)) > INLINE_BYTES:
        return False
    lines = [ln for t in texts for ln in t.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return max(map(len, lines), default=0) <= SMALL_GRID_CHARS or (len(lines) <= 1 and not escalate)


def _check_column(inputs: list[tuple[str, Source]], column: str | None) -> None:
    """ValueError (one line) before the job starts when a file's first line does not name `column`."""
    if column is None:
        return
    if not column.strip() or len(column) > MAX_NAME_CHARS:
        raise ValueError(f"column {column[:80]!r}: a CSV header's name, 1 to {MAX_NAME_CHARS:,} characters")
    for _, src in inputs:
        if isinstance(src, (str, Path)) and str(src) != "-":
            check_column(src, column)


def _resumable(job_id: str, meta: dict[str, str]) -> JobSpec:
    """The spec of a job whose submission can be resumed now; ResumeRefused saying why not otherwise."""
    if not meta or "created" not in meta:
        raise ResumeRefused(f"no job {job_id} (never created, purged, or expired)")
    submission, silent = submission_state(meta)
    if not submission:
        raise ResumeRefused(f"job {job_id} records no submission checkpoint: it cannot be resumed")
    if submission == "complete":
        raise ResumeRefused(f"job {job_id} was submitted completely: nothing to resume (collect it)")
    if submission == "cancelled":
        raise ResumeRefused(f"job {job_id} was cancelled: submit its inputs again as a new job")
    if submission == "running":
        raise ResumeRefused(
            f"job {job_id}: its producer beat {silent or 0:.0f} s ago and may still be running; "
            "stop it, or retry a few seconds after it died"
        )
    return JobSpec.from_meta(job_id, meta)


def _recorded(spec: JobSpec) -> list[Source]:
    """The job's inputs reopened by their recorded names (ResumeRefused when one cannot be)."""
    for name in spec.inputs:
        if name == "-" or not Path(name).is_file():
            what = "stdin" if name == "-" else f"{name}: no such file here"
            raise ResumeRefused(f"job {spec.job} read {what}: give its inputs again after the job id")
    return list(spec.inputs)


def _check_portfolio(portfolio: str | None) -> None:
    """Reject a portfolio the local solvers do not know (embedded mode: they are right here)."""
    from solvers.api import solve_many

    solve_many([], portfolio=portfolio)


class Job:
    """A submitted job: its id, its status, and its results as they arrive (a generate job: `generated`)."""

    def __init__(
        self,
        client: BatchClient,
        job_id: str,
        producer: Producer | None,
        inputs: list[tuple[str, Source]] | Iterable[GenerateTask],
        *,
        taken: list[int] | None = None,
        collected: _Collected | None = None,
    ) -> None:
        """`inputs`: a solve job's named inputs, or a generate job's planned tasks (with `taken`, the
        count of chunks `generated` handed over, which the producer's window reads)."""
        self.client = client
        self.id = job_id
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        # set when the producer thread is done: waited on instead of Thread.join, which an interrupt
        # (Ctrl-C in `submit`) leaves saying the thread stopped while it runs on (CPython 3.11, bpo-45274)
        self._done = threading.Event()
        self._producer = producer
        self._taken = taken
        self._collected = collected or _Collected()
        self.note: str | None = None  # one line for the user about how the job runs (a command prints it)
        if producer is None:
            self._done.set()
        else:
            self._thread = threading.Thread(
                target=self._produce, args=(producer, inputs), name=f"producer-{job_id}", daemon=client.daemon
            )
            self._thread.start()

    def _produce(self, producer: Producer, inputs: Iterable) -> None:
        try:
            if self._taken is not None:
                producer.run_plan(inputs)
            else:
                producer.run(inputs)
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
        """Puzzles this process's producer committed, if it stopped short of the whole input (None when
        it finished, none ran here, a resume took the submission over, or it generates): known here,
        not read back from the broker."""
        if self._producer is None or self._taken is not None or isinstance(self._error, Superseded):
            return None
        if self.producing or self._error is not None:
            return self._producer.checkpoint.index
        return None

    def stopped_words(self) -> str | None:
        """How far this process's producer got, in words, if it stopped short (as `stopped_at`): `860,903
        puzzles`, or for inputs read in splits (their puzzles counted by the workers) `7 splits (3.1 MB of
        9.2 MB)`."""
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

    def _producing_here(self) -> bool:
        """True while this job's producer is a live thread of this process (whatever its beat says)."""
        return self._thread is not None and self._thread.is_alive()

    def status(self) -> JobStatus:
        """Progress, counts by status, rate and live workers."""
        return self.client.store.status(self.id)

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
        """Stream (part, first row, end row) slices as results arrive, or in input order.

        `keep=False` deletes each result from the store once the caller has it (no re-run);
        `acked`: the caller drops them itself once they are durable (`JobStore.ack`). `written`:
        the parts (and their puzzles) an earlier collection wrote into the output this one goes on
        with (ordered: they are the puzzles before the first one this one writes).
        """
        s = self.client.settings
        resender = self.client.resender(self.id)
        stream: Iterable = stream_chunks(
            self.client.store,
            self.id,
            result_ttl=-1 if acked else s.result_ttl if keep else 0,
            poll=s.poll_interval,
            stale_after=s.producer_stale_s,
            idle_timeout=idle_timeout,
            on_wait=on_wait,
            sweep=resender.sweep if resender is not None else None,
            written=written[0] if written else None,
            rows_written=written[1] if written else 0,
            producer_alive=self._producing_here,
        )
        self._collected.on = True  # the producer's window now waits for what this process collects
        stream = self._collected.count(stream)
        if ordered:
            yield from in_order(stream, written[1] if written else 0)
        else:
            yield from arrival_order(stream)

    def generated(self, *, on_wait: Callable[[], None] | None = None) -> Iterator[GenerateResult]:
        """Stream a generate job's chunk results in plan order, each once (RuntimeError for a chunk that
        failed); each is dropped from the store once read (a generate run is not collected twice)."""
        from pipeline.contract.generate import GenerateResult

        s = self.client.settings
        resender = self.client.resender(self.id)
        stream = stream_chunks(
            self.client.store,
            self.id,
            result_ttl=0,
            poll=s.poll_interval,
            stale_after=s.producer_stale_s,
            on_wait=on_wait,
            sweep=resender.sweep if resender is not None else None,
            decode=GenerateResult.decode,
            producer_alive=self._producing_here,
        )
        for result in chunk_order(stream):
            if result.error:
                raise RuntimeError(f"chunk {result.header.chunk}: {result.error}")
            if self._taken is not None:
                self._taken[0] += 1
            yield result

    def results(self, ordered: bool = False, *, keep: bool = True) -> Iterator[Record]:
        """Stream one Record per input puzzle, as they arrive (or in input order).

        The results stay readable `result_ttl` seconds after (call again to read them again;
        embedded, they stay in this process's memory until then or `purge()`); `keep=False`
        drops each as it is read.
        """
        self._refuse_dataset("Job.results()")
        for result, start, stop in self.chunks(ordered, keep=keep):
            if result.columns is not None:  # read from the columns as they are: no JSON text
                index, line = result.row_indices()[start:stop], result.row_lines()[start:stop]
                yield from Record.rows(result.columns.slice(start, stop), result.header.input, index, line)
                continue
            for text in result.lines()[start:stop]:
                yield Record.from_json(text)

    def to_arrow(self, ordered: bool = True, *, keep: bool = True) -> Any:
        """Every record of the job as one Arrow table, once every puzzle is answered: the fields and types
        of the Parquet output (pyarrow: `pip install 'sudoku-batch[parquet]'`).

        Read from the parts as they are stored, whatever the job's format (`client.frame`): result
        columns tabulated as they are, an Arrow IPC part as it came, CSV or JSON Lines rows through
        pyarrow's readers; no Record per row. `ordered`: in input order (else as the parts came).
        Readable again for `result_ttl` like `results()`; `keep=False` drops each part as it is read.
        """
        need("pyarrow", "Job.to_arrow()", "parquet")  # before a part is read: keep=False would drop it
        return self._table("Job.to_arrow()", ordered, keep)

    def to_pandas(self, ordered: bool = True, *, keep: bool = True) -> Any:
        """Every record of the job as a pandas DataFrame (`to_arrow`'s table): what `pandas.read_parquet`
        reads from the Parquet output (`pip install 'sudoku-batch[dataframe]'`)."""
        need("pandas", "Job.to_pandas()", "dataframe")
        need("pyarrow", "Job.to_pandas()", "dataframe")
        return to_pandas(self._table("Job.to_pandas()", ordered, keep))

    def to_polars(self, ordered: bool = True, *, keep: bool = True) -> Any:
        """Every record of the job as a polars DataFrame, from `to_arrow`'s table
        (`pip install 'sudoku-batch[polars]'`)."""
        need("polars", "Job.to_polars()", "polars")
        need("pyarrow", "Job.to_polars()", "polars")
        return to_polars(self._table("Job.to_polars()", ordered, keep))

    def _table(self, what: str, ordered: bool, keep: bool) -> Any:
        """The job's records as an Arrow table (ValueError, one line, for a generate job: it has none)."""
        from client.frame import slices_table

        if self._taken is not None or self.client.store.meta(self.id).get("kind") == "generate":
            raise ValueError(f"{what}: job {self.id} generates puzzles; read them with Job.generated()")
        self._refuse_dataset(what)
        return slices_table(self.chunks(ordered, keep=keep))

    def write(
        self,
        target: Output | DatasetOutput,
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
        """Write every record of the job into `target` (a file or stdout, or a dataset then committed), each
        part's statistics into `summary` once; JobFailed (one line) when records are missing at the end.
        `written`: how far an earlier collection wrote the target (this one goes on from there), kept up to
        date (an interrupted caller knows how far it got). `acked`: each part leaves the store once durable in
        the target (every `ack_s` or `ack_mb`, at the end, at an interrupt) with the target's checkpoint
        (`JobStore.ack`). `on_write`: after a slice; the rest: as `chunks`.
        """
        written = written if written is not None else Written()
        settings, store = self.client.settings, self.client.store
        seen: set[tuple[int, int]] = set()
        left: dict[tuple[int, int], int] = {}  # rows of a part still to write (ordered: it comes in slices)
        pending: list[tuple[int, int]] = []  # parts written whole since the last acknowledgement
        moved, since = 0, (time.monotonic(), 0)  # bytes of parts written; the last ack: when, after how many

        def ack(force: bool = False) -> None:
            """Make the target durable, then drop the parts in it from the store and record the checkpoint."""
            nonlocal since
            due = time.monotonic() - since[0] >= settings.ack_s or moved - since[1] >= settings.ack_mb * 1e6
            if not acked or not (force or due):
                return
            point = target.durable()
            point.update(rows=written.rows, ordered=ordered)
            store.ack(self.id, pending, point)
            pending.clear()
            since = (time.monotonic(), moved)

        done = (written.parts, written.rows) if written.parts is not None else None
        chunks = self.chunks(
            ordered, idle_timeout=idle_timeout, on_wait=on_wait, keep=keep, acked=acked, written=done
        )
        try:
            for result, start, stop in chunks:
                with held():  # an interrupt waits for the slice's records to be written whole
                    target.write(result, start, stop)
                    written.rows += stop - start
                    part = result.part
                    if part not in seen:  # a part's statistics, once (in order, a part may come in slices)
                        seen.add(part)
                        left[part] = len(result)
                        moved += len(result.body) if result.body is not None else 0
                        summary.add(result.header.stats, result.header.input)
                    left[part] -= stop - start
                    if not left[part]:
                        del left[part]
                        pending.append(part)
                    ack()
                if on_write is not None:
                    on_write()
            self.wait_submitted()
            expected = int(store.meta(self.id).get("total", written.rows))
            if written.rows != expected:
                raise JobFailed(f"{expected - written.rows} of {expected} results are missing")
            written.complete = True
            with held():
                ack(force=True)
        except KeyboardInterrupt:
            try:
                ack(force=True)
            except Exception as exc:  # noqa: BLE001 - the broker may be what was interrupted: the output is kept
                log.debug("job %s: the parts written were not acknowledged: %s", self.id, exc)
            raise
        written.manifest = target.commit()
        return written

    def commit(self, *, on_wait: Callable[[], None] | None = None) -> Manifest:
        """Wait for every part of a dataset job, then commit the dataset (`_manifest.json`, then `_SUCCESS`)
        and return its manifest: what `sudoku-batch collect JOB -o DIR/` does, for a job submitted here
        with `dataset=`. ValueError (one line) for a job that writes no dataset; JobFailed (a RuntimeError)
        when lines are missing at the end (nothing is committed then)."""
        from client.dataset import DatasetOutput
        from client.summary import Summary

        meta = self.client.store.meta(self.id)
        dataset = meta.get("dataset")
        if not dataset:
            raise ValueError(f"Job.commit(): job {self.id} writes no dataset: read it with Job.results()")
        summary = Summary()
        try:
            output = DatasetOutput(dataset, meta.get("format", "jsonl"), self.id, meta, summary)
            written = self.write(output, summary, on_wait=on_wait)
        except JobFailed as exc:
            raise JobFailed(f"job {self.id}: {exc}: not committed") from None
        return written.manifest  # type: ignore[return-value]  # a dataset's commit returns its manifest

    def _refuse_dataset(self, what: str) -> None:
        """ValueError, one line, for a job whose records are part files in a dataset: its parts here hold
        only statistics, so reading them as records would give nothing (or fail in Arrow's reader)."""
        dataset = self.client.store.meta(self.id).get("dataset")
        if dataset:
            raise ValueError(
                f"{what}: job {self.id} writes a dataset to {dataset}/: "
                "read it there (pandas, pyarrow, DuckDB)"
            )

    def cancel(self, *, fail: bool = True, wait: float = 30.0) -> None:
        """Stop reading input, waiting at most `wait` s for the producer; results stored stay until purged.

        `fail` marks the job failed; without it the job stays as it is and a resume can go
        on from its checkpoint (broker mode).
        """
        if self._producer is None:
            return
        self._producer.stop(fail)
        if not self._done.wait(wait) and not fail:  # still blocked in a read or a send: it has left anyway
            self._producer.leave()

    def purge(self, *, stop: bool = True) -> int:
        """Delete the job's data from the store; `stop` first tells workers still at it to stop (broker)."""
        return self.client.store.purge(self.id, stop=stop)
