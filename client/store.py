"""The job store interface, and a job's status as every store summarises it: `RedisJobStore` and
`MemoryStore` keep one contract, so producer and collector run unchanged on either."""

from __future__ import annotations

import json
import logging
import re
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from client.numbers import byte_size, plural, sig
from pipeline.contract.keys import COST_FIELDS
from pipeline.contract.part import Part, PartStats
from pipeline.contract.tasks import DEFAULT_PRIORITY, ChunkTask

if TYPE_CHECKING:
    from pipeline.contract.generate import GenerateResult, GenerateTask

    Task = ChunkTask | GenerateTask  # what a producer sends, and keeps until it is answered

Decode = Callable[[bytes | bytearray, str, int], Any]  # (payload, job, chunk) -> a chunk result


def decode_solve(payload: bytes | bytearray, job: str, chunk: int) -> Part:
    """A solve chunk's result from its stored bytes (what collectors read by default)."""
    return Part.decode(payload)


CANCELLED = "the job was cancelled"  # the error of a job cancelled (`Job.cancel`, `sudoku-batch cancel`)
DEFAULT_JOBS_LISTED = 20  # `sudoku-batch jobs` (`--limit`), `BatchClient.jobs`
MAX_JOBS_LISTED = 1000  # each listed job costs its status (a few reads of the broker)
MAX_JOBS_SCANNED = 10_000  # job ids `JobStore.jobs` reads to find the newest: a bounded scan of the broker
log = logging.getLogger(__name__)
NS_COUNT = re.compile(r"\d{1,19}")  # a cost field as HINCRBY keeps it: a non-negative 64-bit integer
PRODUCER_SILENT_S = 5.0  # a producer silent this long may be dead: `status` says so, a resume may take over


class Checkpoint(BaseModel):
    """How far a job's submission got: puzzles [0, index) are answered or in chunks [0, chunks), no others."""

    index: int = 0
    chunks: int = 0
    input: int = 0  # a job read in splits: the input, and its bytes, submitted so far (`index` stays 0)
    offset: int = 0
    tail: str = ""  # digest of puzzle index-1's text: a resumed reader checks it meets the same puzzle there

    @classmethod
    def of(cls, meta: dict[str, str]) -> Checkpoint:
        """The checkpoint in a job's metadata (the start when there is none)."""
        raw = meta.get("checkpoint")
        return cls.model_validate_json(raw) if raw else cls()


class Superseded(RuntimeError):
    """Another producer took the job's submission over (a resume): this one stops without failing the job."""


class JobStatus(BaseModel):
    """A job's progress as `status` shows it."""

    job: str
    state: str  # producing | produced | failed | unknown (the stored state; `phase` is what users read)
    phase: str = ""  # submitting | stopped | solving | done | failed | cancelled | unknown
    inputs: list[str] = []
    created: float = 0.0  # when the job was created (epoch s): `jobs` lists the newest first
    submitted: int = 0  # puzzles read so far (read in splits: counted by the workers so far; then the total)
    total: int | None = None
    done: int = 0
    counts: dict[str, int] = {}
    chunks_sent: int = 0
    chunks_done: int = 0
    elapsed_s: float = 0.0
    rate: float = 0.0  # puzzles per second since the job was created
    eta_s: float | None = None
    workers: list[str] = []
    resent: int = 0  # chunk tasks re-sent by collectors after the broker lost them
    priority: str = DEFAULT_PRIORITY  # its chunks' class on the broker: high | normal | low
    error: str | None = None
    submission: str = ""  # complete | running | stopped (died or failed: resumable) | cancelled | ""
    checkpoint: int = 0  # puzzles safely submitted (a resume goes on from there)
    producer_silent_s: float | None = None  # seconds since the producer last beat (while not complete)
    splits: bool = False  # the workers read the inputs in byte ranges: they count the puzzles, not the client
    submitted_bytes: int = 0  # read in splits: bytes of the inputs sent as splits so far
    input_bytes: int = 0  # read in splits: the inputs' bytes (0: not known)
    cpu_seconds: float = 0.0  # the workers' CPU time for the job, summed over every run of its chunks
    chunk_seconds: float = 0.0  # the wall time of those runs, summed

    def split_submission(self) -> str:
        """How far a submission in splits got, in words: `7 splits (3.1 MB of 9.2 MB)`."""
        return split_words(self.chunks_sent, self.submitted_bytes, self.input_bytes)


class JobStore(ABC):
    """Where producers put jobs and answers, workers put chunk results, and collectors read them."""

    @abstractmethod
    def create(self, job: str, meta: dict[str, str]) -> None:
        """Record a new job with its metadata."""

    @abstractmethod
    def meta(self, job: str) -> dict[str, str]:
        """Return the job's metadata ({} when the job does not exist)."""

    @abstractmethod
    def update(self, job: str, fields: dict[str, str]) -> None:
        """Set some metadata fields of an existing job (nothing when it is gone: purged or expired)."""

    @abstractmethod
    def claim(self, job: str) -> str:
        """Make a new producer token the only one `commit` accepts for `job` (fences off an old producer)."""

    def commit(
        self,
        job: str,
        token: str,
        checkpoint: Checkpoint,
        fields: dict[str, str] | None = None,
        answered: Part | None = None,
        task: ChunkTask | GenerateTask | None = None,
    ) -> None:
        """Atomically store a producer's answers and task, move its checkpoint; Superseded unless it holds
        `token` (changing nothing: a producer taken over writes no chunk id twice)."""
        meta = {"checkpoint": checkpoint.model_dump_json(), **(fields or {})}
        self._commit(job, token, meta, answered, task)

    @abstractmethod
    def _commit(
        self, job: str, token: str, meta: dict[str, str], answered: Part | None, task: Task | None
    ) -> None:
        """`commit` in one step: `meta` holds the checkpoint (and the fields given with it)."""

    @abstractmethod
    def owns(self, job: str, token: str) -> bool:
        """True while `token` is the job's producer token."""

    @abstractmethod
    def put_result(self, job: str, result: Part | GenerateResult) -> bool:
        """Store a part or a generate chunk's result; False: a part overlapping one stored, or job gone."""

    @abstractmethod
    def arrivals(self, job: str, cursor: int) -> tuple[list[Any], int]:
        """The ids of results arrived from `cursor` on (parts: (chunk, row); generate: chunk), next cursor."""

    @abstractmethod
    def arrived_count(self, job: str) -> int:
        """How many chunks are answered whole (the producer's backpressure)."""

    @abstractmethod
    def fetch(self, job: str, chunks: Sequence[Any]) -> list[bytes | None]:
        """Return the encoded results of `chunks` (None for one that is gone)."""

    def fetch_results(self, job: str, chunks: Sequence[Any], decode: Decode = decode_solve) -> list[Any]:
        """Return the decoded results of `chunks` (None for one that is gone): what collectors read."""
        fetched = zip(chunks, self.fetch(job, chunks), strict=True)
        return [None if p is None else decode(p, job, c) for c, p in fetched]

    def stored(self, job: str, chunks: Sequence[Any]) -> list[bool]:
        """Which of `chunks` still have their result stored (not once `solve` collected it, or it expired)."""
        return [p is not None for p in self.fetch(job, chunks)]

    @abstractmethod
    def job_ids(self, most: int) -> list[str]:
        """The ids of up to `most` jobs the store holds, in no particular order."""

    @abstractmethod
    def created_at(self, jobs: Sequence[str]) -> dict[str, float]:
        """When each of `jobs` was created (epoch s); a job gone (or not created yet) is left out."""

    def jobs(self, most: int) -> list[JobStatus]:
        """The `most` newest jobs' statuses (of `MAX_JOBS_SCANNED` ids), newest first; one gone or
        unreadable is left out (one warning line without the value: it must not hide the others)."""
        created = self.created_at(self.job_ids(MAX_JOBS_SCANNED))
        out = []
        for job in sorted(created, key=lambda job: (-created[job], job))[:most]:
            try:
                out.append(self.status(job))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("job %s: left out of the list: unreadable metadata (%s)", job, type(exc).__name__)
        return [status for status in out if status.state != "unknown"]

    @abstractmethod
    def cancel(self, job: str) -> bool:
        """Stop the job for good, its results kept: marked failed (`CANCELLED`; broker: its stop key set, so
        workers write nothing more); False when the job is gone or stopped already."""

    @abstractmethod
    def mark_collected(self, job: str, chunks: Sequence[Any], ttl: int) -> None:
        """Let collected results expire after `ttl` seconds."""

    @abstractmethod
    def stats(self, job: str) -> list[PartStats]:
        """Return the statistics of every finished chunk."""

    def charge(self, job: str, cost: tuple[int, int]) -> None:  # noqa: B027 - a broker's: its workers do
        """Add a run's cost (CPU ns, wall ns) to the job's `cpu_ns` and `chunk_wall_ns` (if it exists)."""

    @abstractmethod
    def hint(self, job: str) -> tuple[int, float]:
        """Return (puzzles solved, CPU seconds) so far: the producer's chunk-sizing feedback."""

    @abstractmethod
    def wait(self, job: str, timeout: float) -> None:
        """Sleep until a result may have arrived, at most `timeout` seconds."""

    @abstractmethod
    def wait_arrival(self, job: str, timeout: float) -> bool:
        """Block until a part arrives or the job's state changes, at most `timeout` s; False on a timeout."""

    def live_workers(self) -> list[str]:
        """Name the worker processes seen recently (none in this process: its own pool solves its jobs)."""
        return []

    @abstractmethod
    def purge(self, job: str, *, stop: bool = True) -> int:
        """Delete everything of a job; how many keys went (`stop`: a stop key outlives them: workers stop)."""

    def ack(self, job: str, parts: Sequence[Any], checkpoint: dict[str, Any]) -> None:
        """The parts are durable in the output: drop them, record how far it got (a resume's checkpoint)."""
        self.mark_collected(job, parts, 0)

    def split_total(self, job: str) -> int | None:
        """A job read in splits: its puzzles once every split is counted, else None (no split here)."""
        return None

    def split_counted(self, job: str) -> int:
        """A job read in splits: the puzzles its workers have counted so far (0 here: no split)."""
        return 0

    def collected(self, job: str) -> tuple[dict[str, Any], set[Any]]:
        """The last checkpoint `ack` recorded and the parts it dropped (none embedded: never resumed)."""
        return {}, set()

    def drop_idle_connections(self) -> None:  # noqa: B027 - a store in this process holds no connection
        """Forget pooled connections not in use (after an interrupt, one may hold a reply nobody read)."""

    def status(self, job: str) -> JobStatus:
        """Summarise a job's progress from its metadata and chunk statistics."""
        meta = self.meta(job)
        if not meta or "created" not in meta:
            error = f"no such job {job} (never created, purged or expired)"
            return JobStatus(job=job, state="unknown", error=error)
        stats = self.stats(job)
        counts: Counter[str] = Counter()
        for s in stats:
            counts.update(s.counts)
        done = sum(s.n for s in stats)  # puzzles answered: a chunk's parts count as they are published
        chunks_done = _chunks_done(stats)
        submission, silent = submission_state(meta)
        elapsed = _elapsed(meta, done, max((s.end for s in stats), default=0.0), submission)
        total = int(meta["total"]) if "total" in meta else None
        splits = bool(meta.get("splits"))
        if total is None and splits and meta.get("state") == "produced":
            total = self.split_total(job)  # read in splits: known once its workers counted every split
        rate = done / elapsed if done else 0.0
        going = not meta.get("cancelled")  # a cancelled job has no ETA
        checkpoint = Checkpoint.of(meta)
        # the producer's counts are a beat's (a second old or more): never fewer than answered or checkpointed
        counted = self.split_counted(job) if splits and total is None else 0
        submitted = max(int(meta.get("submitted", 0)), checkpoint.index, done, counted)
        sent, size = split_bytes(meta) if splits else (0, 0)
        cpu_s, chunk_s = job_cost(job, meta)
        return JobStatus(
            job=job,
            state=meta.get("state", "unknown"),
            phase=job_phase(meta, done, total),
            inputs=input_names(meta),
            created=float(meta["created"]),
            submitted=total if total is not None else submitted,
            total=total,
            done=done,
            counts=dict(counts),
            chunks_sent=max(int(meta.get("chunks_sent", 0)), checkpoint.chunks, chunks_done),
            chunks_done=chunks_done,
            elapsed_s=elapsed,
            rate=rate,
            eta_s=(total - done) / rate if total is not None and rate > 0 and going else None,
            workers=self.live_workers(),
            resent=int(meta.get("resent", 0)),
            priority=meta.get("priority", DEFAULT_PRIORITY),
            error=meta.get("error"),
            submission=submission,
            checkpoint=checkpoint.index,
            producer_silent_s=silent,
            splits=splits,
            submitted_bytes=sent,
            input_bytes=size,
            cpu_seconds=cpu_s,
            chunk_seconds=chunk_s,
        )


def job_cost(job: str, meta: dict[str, str]) -> tuple[float, float]:
    """(CPU s, wall s) of the job's runs from its meta's `cpu_ns` and `chunk_wall_ns`; a field that is no
    count (a hand-written value) counts 0, with one warning line that does not echo it."""
    out = []
    for field in COST_FIELDS:
        raw = meta.get(field, "0")
        if NS_COUNT.fullmatch(raw) is None or int(raw) >= 2**63:
            log.warning(
                "job %s: its %s is not a count of ns (%d characters): counted as 0", job, field, len(raw)
            )
            raw = "0"
        out.append(int(raw) / 1e9)
    return out[0], out[1]


def cost_words(cpu_s: float, chunk_s: float, embedded: bool) -> str:
    """What a job cost, in words: `12.3 CPU s on its workers, 14.1 s of chunks` (`status`, the report)."""
    where = "local processes" if embedded else "workers"
    return f"{sig(cpu_s)} CPU s on its {where}, {sig(chunk_s)} s of chunks"


def _elapsed(meta: dict[str, str], done: int, last: float, submission: str) -> float:
    """A job rate's seconds: to its last answer, now while it runs, a stopped producer's beat, the cancel."""
    created = float(meta["created"])
    if meta.get("cancelled"):  # nothing more comes: the rate of what it did until the cancel
        end = max(last, float(meta["cancelled"]))
    elif submission == "stopped":  # nothing more comes until a resume
        end = max(last, float(meta.get("producer_beat") or 0.0)) or time.time()
    elif meta.get("state") != "produced" or done < int(meta.get("total", -1)):  # it runs
        end = max(last, time.time())
    else:
        end = last or time.time()
    return max(1e-9, end - created)


def split_bytes(meta: dict[str, str]) -> tuple[int, int]:
    """A job read in splits: (bytes sent as splits so far, its inputs' bytes or 0) from its metadata."""
    sizes = [int(p["size"]) if p else 0 for p in json.loads(meta.get("prints") or "[]")]
    return sent_bytes(Checkpoint.of(meta), sizes), sum(sizes)


def sent_bytes(checkpoint: Checkpoint, sizes: list[int]) -> int:
    """Bytes of inputs (of `sizes` bytes) a submission in splits has sent up to `checkpoint`."""
    return sum(sizes[: checkpoint.input]) + checkpoint.offset


def input_names(meta: dict[str, str]) -> list[str]:
    """The names of a job's inputs, as its metadata records them (one a line)."""
    return meta["inputs"].split("\n") if meta.get("inputs") else []


def submitted_words(meta: dict[str, str]) -> str:
    """How far a job's submission got, from its meta: `860,903 puzzles` or `7 splits (3.1 MB of 9.2 MB)`."""
    checkpoint = Checkpoint.of(meta)
    if meta.get("splits"):
        return split_words(checkpoint.chunks, *split_bytes(meta))
    return plural(checkpoint.index, "puzzle")


def split_words(splits: int, sent: int, size: int = 0) -> str:
    """How far a submission in splits got (`size` 0: unknown): `7 splits (3.1 MB of 9.2 MB)`."""
    of = f" of {byte_size(size)}" if size else ""
    return f"{plural(splits, 'split')} ({byte_size(sent)}{of})"


def _chunks_done(stats: list[PartStats]) -> int:
    """Chunks every row of which is answered, from their parts' statistics (a generate chunk: one each)."""
    rows: Counter[int] = Counter()
    whole = 0
    for s in stats:
        rows[s.chunk] += s.n
        whole += s.chunk < 0 or not s.chunk_n or rows[s.chunk] == s.chunk_n
    return whole


def job_phase(meta: dict[str, str], done: int, total: int | None) -> str:
    """Where a job is, as a user reads it: submitting, stopped, solving, done, failed or cancelled."""
    state = meta.get("state")
    if meta.get("cancelled"):
        return "cancelled"
    if state == "producing" and submission_state(meta)[0] == "stopped":  # resumable: the page's word too
        return "stopped"
    if state == "produced":
        return "done" if total is not None and done >= total else "solving"
    return {"producing": "submitting", "failed": "failed"}.get(state or "", "unknown")


def submission_state(meta: dict[str, str]) -> tuple[str, float | None]:
    """A job's submission (complete, running, stopped: resumable, cancelled, "") and its producer's silence"""
    state = meta.get("state")
    if state == "produced":
        return "complete", None
    if "checkpoint" not in meta or meta.get("kind") == "generate":  # no submission to resume
        return "", None
    if meta.get("cancelled"):  # stopped on purpose: nothing to resume
        return "cancelled", None
    beat = float(meta.get("producer_beat") or meta.get("created") or 0.0)
    if beat <= 0:  # `Producer.leave`: the producer stopped and said so
        return "stopped", None
    silent = time.time() - beat
    if state == "failed" or silent > PRODUCER_SILENT_S:
        return "stopped", silent
    return "running", silent
