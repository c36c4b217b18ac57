"""`BatchClient`: the Python face of the pipeline, for scripts, notebooks and the CLI (jobs: `client.job`).

    job = BatchClient("redis://host:6379/0").submit("corpus.txt", time_limit=5, portfolio="race")
    for record in job.results(): ...

With no broker (argument or `SUDOKU_BATCH_BROKER`) the job runs embedded: the same
producer, chunk function and collector, with local processes and an in-memory store.
"""

from __future__ import annotations

import io
import os
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack
from urllib.parse import urlsplit

from client.config import ClientSettings, check_broker_url
from client.dataset import check_directory, claim_directory, claim_lives, dataset_url
from client.job import Collected, Job
from client.memory_store import MemoryStore
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
from client.store import Checkpoint, JobStore, submission_state
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
from pipeline.engine.reader import check_column, peek_stdin
from solvers.model.puzzle import as_box

if TYPE_CHECKING:
    from client.redis_store import RedisJobStore
    from client.resend import Resender
    from pipeline.contract.generate import GenerateOptions
    from solvers.model.puzzle import Box


class SubmitOptions(TypedDict, total=False):
    """The options of a job as `BatchClient.submit_inputs` takes them (and `submit` passes on)."""

    time_limit: float | None
    portfolio: str | None
    box: str | None
    bounded: bool
    seed: int | None
    escalate_after: float
    format: str
    dataset: str | None
    compression: str
    splits: bool | None
    column: str | None


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

    def submit(self, source: Source, *, name: str | None = None, **options: Unpack[SubmitOptions]) -> Job:
        """Start a job over a path (`-` for stdin, `.gz` accepted) or an iterable of puzzle strings, named
        `name` (the path, or `<strings>`); `options` as `submit_inputs` (`time_limit`, `portfolio`, `box`,
        `seed`, `escalate_after`, `format`, `dataset`, `compression`, `splits`, `column`)."""
        if name is None:
            name = str(source) if isinstance(source, (str, Path)) else "<strings>"
        return self.submit_inputs([(name, source)], **options)

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

        `time_limit`: seconds per puzzle (DEFAULT_TIME_LIMIT_S, 20; None or 0: no limit, as before
        there was a default: a hard puzzle may then run for ever). `seed` fixes the solvers' seeds
        (the same seed, the same random choices); None draws them from the job id, so every job
        tries differently. A puzzle still unanswered after `escalate_after` seconds is escalated: idle
        workers (or local processes) search it too, each with another seed; 0 never.
        `bounded` keeps a window of chunks in flight (memory and queue stay small while
        someone collects); `submit` without a collector needs it off.
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
        collected = Collected()
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


MAX_SEED = 2**63  # seeds are 63-bit: any one fits a JSON number and numpy's SeedSequence
SMALL_GRID_CHARS = 2 * 81 + 1  # the longest line of a 9x9 grid: 81 values with separators


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
