"""`BatchClient`: the Python face of the pipeline, for scripts, notebooks and the CLI (jobs: `client.job`);
with no broker (argument or `SUDOKU_BATCH_BROKER`) a job runs embedded: the same producer, chunk function and
collector, with local processes and an in-memory store."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack
from urllib.parse import urlsplit

from client.config import ClientSettings, check_broker_url
from client.dataset import claim_directory, claim_lives
from client.job import Collected, Job
from client.memory_store import MemoryStore
from client.plan import (
    JobSpec,
    ResumeRefused,
    Source,
    check_columns,
    dataset_plan,
    fingerprint,
    fleet_roots,
    new_job_id,
    opened,
    resumable,
    resumed_inputs,
    small_inputs,
)
from client.pool import LocalPool, default_workers, max_workers, warm_solvers
from client.store import DEFAULT_JOBS_LISTED, MAX_JOBS_LISTED, Checkpoint, JobStatus, JobStore
from client.transport import CeleryTransport, LocalTransport, Transport
from pipeline.contract.keys import KEY_PREFIX
from pipeline.contract.outbox import parse_task
from pipeline.contract.tasks import (
    DEFAULT_ESCALATE_AFTER_S,
    DEFAULT_PRIORITY,
    DEFAULT_TIME_LIMIT_S,
    MAX_ESCALATE_AFTER_S,
    MAX_SEED,
    MAX_TIME_LIMIT_S,
    check_priority,
)
from pipeline.engine.dataset import Claim
from solvers.model.puzzle import as_box

if TYPE_CHECKING:
    from client.producer import Producer
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
    priority: str


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
        """`daemon`: producer threads do not keep the process alive (the CLI ends at once on a failure or an
        interrupt)."""
        self.settings = settings or ClientSettings()
        self.daemon = daemon
        url = broker_url if broker_url is not None else self.settings.broker
        self.url = url or None
        self.workers = workers or min(default_workers(), max_workers())
        self.pool = LocalPool(self.workers)
        self._celery: CeleryTransport | None = None
        self._live: tuple[float, int] = (0.0, 0)
        if self.url:
            from client.config import connect
            from client.redis_store import RedisJobStore

            check_broker_url(self.url)
            self.store: JobStore = RedisJobStore(connect(self.url, self.settings), self.settings)
        else:
            self.store = MemoryStore()

    @property
    def embedded(self) -> bool:
        """True when jobs run in local processes (no broker)."""
        return self.url is None

    def submit(self, source: Source, *, name: str | None = None, **options: Unpack[SubmitOptions]) -> Job:
        """Start a job over a path (`-`: stdin, `.gz` accepted) or an iterable of puzzle strings, named `name`
        (the path, or `<strings>`); `options` as `submit_inputs`."""
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
        priority: str = DEFAULT_PRIORITY,
    ) -> Job:
        """Start a job over several named inputs, read in order in a background thread.

        `time_limit`: seconds per puzzle (None or 0: no limit). `seed` fixes the solvers' seeds (None: drawn
        from the job id). `escalate_after`: seconds before idle processes search an unanswered puzzle too (0:
        never). `bounded`: a window of chunks in flight (`submit` without a collector needs it off). `format`:
        what the solving processes render records in (`jsonl`, `csv`, `parquet`: moved into the output unread;
        `columns`). `dataset`: a directory (path or URL) they write part files to (`compression` none, gzip or
        zstd), owned by the job until collected (`DirectoryClaimed` while another job owns it; with a broker,
        a ValueError outside every live worker's data roots). `splits`: with a broker and a dataset, workers
        read file inputs in byte ranges (None: when every input allows it, else `Job.note` says why not;
        True: or a ValueError). `column`: a CSV input's puzzle column (None: the first of
        `solvers.model.parse.PUZZLE_COLUMNS` its header names). `priority`: `high`, `normal` or `low`, the
        class of its chunks on the broker. A bad value is a one-line ValueError.
        """
        fleet = None if self.embedded else lambda: fleet_roots(self._redis_store().worker_roots())
        url, split_urls, note = dataset_plan(inputs, dataset, format, compression, splits, box, fleet)
        as_box(box)  # a bad box shape is the caller's error, raised here
        check_priority(priority)
        self._check_solving(time_limit, seed, escalate_after, portfolio)
        time_limit = time_limit or None  # 0: no limit
        prints = [fingerprint(src) for _, src in inputs] if not self.embedded else []
        names = [n for n, _ in inputs]
        check_columns(inputs, column)
        spec = JobSpec(
            new_job_id(),
            names,
            box,
            time_limit,
            portfolio,
            prints,
            seed,
            escalate_after or None,
            format,
            url,
            compression,
            split_urls,
            column,
            priority,
        )
        return self._start(spec, opened(inputs), bounded, note)

    def _check_solving(
        self, time_limit: float | None, seed: int | None, escalate_after: float, portfolio: str | None
    ) -> None:
        """ValueError (one line) for a time limit, seed or escalation delay out of bounds, or (embedded: the
        local solvers are right here) a portfolio they do not know: refused before the job exists."""
        if time_limit is not None and not 0 <= time_limit <= MAX_TIME_LIMIT_S:  # false for nan too
            raise ValueError(
                f"time_limit {time_limit:g}: must be 0 (no limit) or above, at most {MAX_TIME_LIMIT_S:g} s"
            )
        if seed is not None and not 0 <= seed <= MAX_SEED:
            raise ValueError(f"seed {seed}: must be between 0 and {MAX_SEED}")
        if not 0 <= escalate_after <= MAX_ESCALATE_AFTER_S:  # false for nan too
            raise ValueError(
                f"escalate_after {escalate_after:g}: must be 0 (never) to {MAX_ESCALATE_AFTER_S:g} s"
            )
        if self.embedded:  # the local solvers are right here: a portfolio they do not know is refused now
            from solvers.api import solve_many

            solve_many([], portfolio=portfolio)

    def _start(self, spec: JobSpec, inputs: list[tuple[str, Source]], bounded: bool, note: str | None) -> Job:
        """Create the job in the store, claim its dataset, start the local processes it needs, and hand back
        the Job with its producer reading `inputs` (opened): the store holds the job before anything runs."""
        self.store.create(spec.job, spec.meta())
        if spec.dataset is not None:
            self._claim(spec.dataset, spec.job)
        escalate = bool(spec.escalate_after) and self.workers > 1  # idle processes could take a slow puzzle
        if self.embedded and not small_inputs(inputs, escalate=escalate):
            self.pool.start()  # here, before the producer thread exists: the pool is forked
        elif self.embedded:
            warm_solvers()  # what the pool's processes load: a later job or command compiles no more
        collected = Collected()
        consumed = lambda: collected.chunks if collected.on else self.store.arrived_count(spec.job)  # noqa: E731
        producer = self._producer(spec, bounded, 2, consumed=consumed)
        job = Job(self, spec.job, producer, inputs, collected=collected)
        job.note = note
        return job

    def _claim(self, url: str, job: str) -> None:
        """Make `job` the one owner of its dataset directory (after it exists in the store, so another client
        sees it lives); a job refused leaves the store again."""
        place = ""  # where this client's jobs live, without credentials: `host:port/db [prefix P]`
        if self.url is not None:
            parts = urlsplit(self.url)
            place = f"{parts.hostname}:{parts.port or 6379}/{parts.path.strip('/') or '0'}"
            if self.settings.key_prefix != KEY_PREFIX:
                place += f" prefix {self.settings.key_prefix}"
        claim = Claim(job=job, broker=place, host=socket.gethostname(), pid=os.getpid(), claimed=time.time())
        lives = lambda held: claim_lives(held, self.store.meta(held.job), place)  # noqa: E731
        try:
            claim_directory(url, claim, lives)
        except BaseException:
            self.store.purge(job, stop=False)
            raise

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
        priority: str | None = None,
    ) -> Job:
        """Go on submitting a job whose producer died or failed half way, from its checkpoint (a producer
        still running is fenced off). `sources`: the job's inputs again (None: the recorded paths); options
        given must be the job's. ResumeRefused (one line) when the job is gone or complete, its producer
        beats, or the inputs differ."""
        if self.embedded:
            raise ResumeRefused("resuming needs a broker: an embedded job lives and dies with its process")
        meta = self.store.meta(job_id)
        spec = resumable(job_id, meta)
        given = {"time_limit": time_limit, "portfolio": portfolio, "box": box, "column": column}
        given["priority"] = priority
        inputs = resumed_inputs(spec, sources, given)
        token = self.store.claim(job_id)  # first: an old producer can no longer move the checkpoint read next
        meta = self.store.meta(job_id)
        if meta.get("state") == "produced":  # its producer finished just before the claim
            raise ResumeRefused(f"job {job_id} was submitted completely: nothing to resume (collect it)")
        checkpoint = Checkpoint.of(meta)
        kept = self._redis_store().outbox(job_id).get(checkpoint.chunks - 1)  # the last task, if unanswered:
        if kept is not None:  # a killed producer may not have sent it (sent twice, it is answered once)
            self._celery_transport().send(parse_task(kept[1]))
        return Job(self, job_id, self._producer(spec, bounded, 0, resume=checkpoint, token=token), inputs)

    def generate(
        self, box: Box, plan: list[tuple[int, int, int]], options: GenerateOptions, meta: dict[str, str]
    ) -> Job:
        """Start a generate job: one task per planned chunk `(index, count, seed)`, results in plan order; the
        window counts chunks `Job.generated` handed over."""
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
        if self.embedded and self.workers > 1:
            self.pool.start(partial(warm_generator, box), races=False)
        taken = [0]
        producer = self._producer(spec, bounded=True, spare=0, consumed=lambda: taken[0])
        return Job(self, spec.job, producer, tasks, taken=taken)

    def job(self, job_id: str) -> Job:
        """Attach to an existing job (broker mode: from any machine)."""
        return Job(self, job_id, None, [])

    def jobs(self, limit: int = DEFAULT_JOBS_LISTED) -> list[JobStatus]:
        """The `limit` newest jobs' statuses, newest first (`sudoku-batch jobs`); ValueError outside
        1..MAX_JOBS_LISTED."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_JOBS_LISTED:
            raise ValueError(f"the jobs listed: {limit!r} is not a whole number from 1 to {MAX_JOBS_LISTED}")
        return self.store.jobs(limit)

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

    def _producer(self, spec: JobSpec, bounded: bool, spare: int, **options: Any) -> Producer:
        """The job's producer, its tasks and window of chunks in flight routed to the local processes (two
        each, `spare` more), or the broker's workers (`bounded`: a few per live worker; else no window)."""
        from client.producer import Producer  # here: it loads numba, which `status` or `jobs` never need

        window: Callable[[], int] | None
        if self.embedded:
            transport: Transport = LocalTransport(self.store, spec.job, self.pool)
            window = lambda: 2 * self.workers + spare  # noqa: E731
        else:
            transport, window = self._celery_transport(), self._broker_window if bounded else None
        return Producer(spec, self.store, transport, self.settings, window, **options)

    def _celery_transport(self) -> CeleryTransport:
        if self._celery is None:
            classes = lambda job: self.store.meta(job).get("priority")  # noqa: E731
            self._celery = CeleryTransport(self.url, self.settings, classes)  # type: ignore[arg-type]
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
