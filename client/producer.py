"""The producer: stream inputs, answer invalid lines itself, send the rest in sized chunks.

Nothing is held beyond the chunk being filled (and, with a window, the chunks in
flight), so a corpus of any length streams through. Every puzzle read gets an index
and exactly one answer: either an `invalid` result written straight to the store, or a
place in a chunk task.

Every chunk is committed to the store (answered results, the task kept for re-sending,
and the job's checkpoint) before it is sent, in input order, so the checkpoint always
names a prefix of the input that is fully submitted: a producer that dies half way can
be resumed from there (`BatchClient.resume`) with the same chunk numbering.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pydantic import BaseModel, TypeAdapter

from client.config import ClientSettings
from client.store import Checkpoint, JobStore, Superseded
from client.transport import Transport
from pipeline.contract.part import Part
from pipeline.contract.runs import join_texts, to_runs
from pipeline.contract.tasks import (
    MAX_CHUNK_PUZZLES,
    MAX_SPLIT_ENTRIES,
    ChunkTask,
    Dataset,
    InputRange,
    solver_seed,
)
from pipeline.engine.dataset import commit_part, stage_part
from pipeline.engine.inputs import csv_field
from pipeline.engine.lines import SlabTexts, has_grid_rows
from pipeline.engine.reader import read_blocks
from pipeline.engine.roots import DataRoots
from pipeline.engine.solve import answered_chunk
from pipeline.engine.storage import Storage, absolute, is_url, storage_for

if TYPE_CHECKING:
    from pipeline.contract.generate import GenerateTask

log = logging.getLogger(__name__)

Source = str | Path | IO[bytes] | Iterable[str]
MAX_ANSWERED = 1000  # invalid lines buffered before the producer writes their results
HEAD_BYTES = 1 << 20  # a file input is fingerprinted by its size and the SHA-256 of this many first bytes


class JobCancelled(RuntimeError):
    """The job was cancelled while its input was being read."""


class ResumeRefused(ValueError):
    """A resume cannot go on: the job is complete or still producing, or the inputs are not the job's."""


class InputPrint(BaseModel):
    """A file input's fingerprint: what a resume compares before reading it again."""

    size: int
    head: str  # SHA-256 (hex, 32 digits) of the first HEAD_BYTES bytes


PRINTS = TypeAdapter(list[InputPrint | None])


def fingerprint(source: Source) -> InputPrint | None:
    """Size and head digest of a file input; None for stdin, streams, iterables and unreadable paths."""
    if not isinstance(source, (str, Path)) or str(source) == "-":
        return None
    try:
        if isinstance(source, str) and is_url(source):
            store = storage_for(source)
            with store.open_read(source) as f:
                head = f.read(HEAD_BYTES)
            return InputPrint(size=store.size(source), head=hashlib.sha256(head).hexdigest()[:32])
        with open(source, "rb") as f:
            head = f.read(HEAD_BYTES)
        return InputPrint(size=os.path.getsize(source), head=hashlib.sha256(head).hexdigest()[:32])
    except OSError:
        return None


def splittable(inputs: list[tuple[str, Source]], box: str | None) -> tuple[list[str] | None, str]:
    """The inputs as the workers would read them in splits (absolute paths or URLs), or None and why they
    cannot be: stdin, a stream, a compressed file, or one holding grids written over several lines."""
    urls = []
    for name, src in inputs:
        if not isinstance(src, (str, Path)) or str(src) == "-":
            return None, f"{name} is not a file the workers can read"
        text = str(src)
        try:
            store = storage_for(text)
            with store.open_read(text) as f:
                head = f.read(HEAD_BYTES)
        except OSError as exc:
            return None, f"{name}: {exc}"
        if head[:2] == b"\x1f\x8b":
            return None, f"{name} is compressed: workers read plain lines only"
        if has_grid_rows(head, box):
            return None, f"{name} holds grids written over several lines (splits need one puzzle a line)"
        urls.append(absolute(text))
    return urls, ""


def uncovered(fleet: dict[str, DataRoots], location: str) -> str | None:
    """The first live worker (of `fleet`: name -> its data roots) that may not read or write `location`, or
    None when every one may (and when no worker is live)."""
    return next((name for name, roots in fleet.items() if not roots.allows(location)), None)


def check_writable(fleet: dict[str, DataRoots], url: str) -> None:
    """ValueError (one line, saying how to allow it) when a live worker may not write the dataset `url`: it
    would fail the job at its first chunk. With no live worker, nothing to check (one that joins later
    and may not write it fails the job in one line)."""
    refused = uncovered(fleet, url)
    if refused is not None:
        raise ValueError(
            f"the dataset {url}/ lies outside the data roots of live worker {refused} "
            f"({', '.join(fleet[refused].texts) or 'none'}): start the workers with --data-root {url} "
            "(or a directory above it) to let them write it"
        )


def split_plan(
    inputs: list[tuple[str, Source]], box: str | None, splits: bool | None, fleet: dict[str, DataRoots]
) -> tuple[list[str] | None, str | None]:
    """The inputs the workers read in splits (`splittable`, each under every live worker's data roots; at
    least one worker live), or None and, when only the roots stand in the way, a note for the user that
    this machine reads them; ValueError (one line) when `splits` is True and they cannot be."""
    urls, why = splittable(inputs, box)
    if urls is None:
        if splits:
            raise ValueError(f"cannot read the inputs in splits: {why}")
        return None, None
    unread = next((u for u in urls if not fleet or uncovered(fleet, u) is not None), None)
    if unread is None:
        return urls, None
    where = unread.rsplit("/", 1)[0] or "/"
    if splits:
        raise ValueError(
            f"cannot read the inputs in splits: workers read no files under {where} (start them with "
            f"--data-root {where})"
        )
    note = (
        f"workers read no files under {where}: this machine reads it; start workers with --data-root "
        f"{where} to let them read splits"
    )
    return None, note


def fleet_roots(published: dict[str, list[str]]) -> dict[str, DataRoots]:
    """Live worker -> its data roots, from what each published (`RedisJobStore.worker_roots`); a worker whose
    roots do not parse here has none."""
    fleet = {}
    for name, texts in published.items():
        try:
            fleet[name] = DataRoots.parse(texts)
        except ValueError:
            fleet[name] = DataRoots.parse([])
    return fleet


def digest(text: str) -> str:
    """A short digest of one puzzle's text (the checkpoint's `tail`)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def new_job_id() -> str:
    """A fresh job id (uuid4 hex)."""
    return uuid.uuid4().hex


@dataclass
class JobSpec:
    """What a job solves and how (and, to resume it, what its file inputs looked like)."""

    job: str
    inputs: list[str]
    box: str | None = None
    time_limit: float | None = None
    portfolio: str | None = None
    prints: list[InputPrint | None] = field(default_factory=list)
    seed: int | None = None  # the solvers' seeds derive from it (None: from the job id, new every job)
    escalate_after: float | None = None  # seconds before a slow puzzle is escalated to idle processes
    format: str = (
        "columns"  # what the solving processes render the records in (`pipeline.contract.tasks.FORMATS`)
    )
    dataset: str | None = None  # the directory the solving processes write their parts to (`-o DIR/`)
    compression: str = "none"  # of a dataset's JSON Lines or CSV parts
    splits: list[str] | None = None  # the inputs as the workers read them, in splits (None: read here)
    column: str | None = None  # a CSV input's puzzle column as named (None: a header naming one, if any)

    def meta(self) -> dict[str, str]:
        """The job's metadata as stored (strings only), with the checkpoint at the start."""
        out = {"created": f"{time.time():.6f}", "state": "producing", "inputs": "\n".join(self.inputs)}
        out["prints"] = PRINTS.dump_json(self.prints).decode()
        out["checkpoint"] = Checkpoint().model_dump_json()
        out["format"] = self.format
        for key in ("box", "time_limit", "portfolio", "seed", "escalate_after", "dataset", "column"):
            value = getattr(self, key)
            if value is not None:
                out[key] = str(value)
        if self.dataset is not None:
            out["compression"] = self.compression
        if self.splits is not None:
            out["splits"] = "\n".join(self.splits)
        return out

    def task_dataset(self) -> Dataset | None:
        """Where a task's parts go (None: back through the job store)."""
        if self.dataset is None:
            return None
        return Dataset(url=self.dataset, format=self.format, compression=self.compression)  # type: ignore[arg-type]

    @classmethod
    def from_meta(cls, job: str, meta: dict[str, str]) -> JobSpec:
        """The spec a job was submitted with, read back from its metadata."""
        limit = meta.get("time_limit")
        inputs = meta["inputs"].split("\n") if meta.get("inputs") else []
        prints = PRINTS.validate_json(meta["prints"]) if meta.get("prints") else []
        prints += [None] * (len(inputs) - len(prints))
        seed, escalate = meta.get("seed"), meta.get("escalate_after")
        splits = meta["splits"].split("\n") if meta.get("splits") else None
        return cls(
            job, inputs, meta.get("box"), float(limit) if limit else None, meta.get("portfolio"), prints,
            int(seed) if seed else None, float(escalate) if escalate else None, meta.get("format", "columns"),
            meta.get("dataset"), meta.get("compression", "none"), splits, meta.get("column"),
        )  # fmt: skip


class ChunkSizer:
    """Chunk sizes aiming at `target_s` of solving each, learnt from the results that came back.

    Before any feedback the size starts small for the grid size and doubles per chunk;
    with feedback it follows target / (CPU seconds per puzzle), growing at most 2x per
    chunk (so small jobs still spread over the workers) and bounded by the payload size.
    """

    def __init__(self, target_s: float, max_bytes: int, most: int = MAX_CHUNK_PUZZLES) -> None:
        self.target_s = target_s
        self.max_bytes = max_bytes
        self.most = most  # puzzles a chunk holds at most (a split: what a worker reads, not a message)
        self.last = 0

    @staticmethod
    def initial(text_len: int) -> int:
        """A first chunk of well under a second whatever the grid size (text length ~ cells); from
        25x25 up one puzzle may take seconds, so chunks start at one and spread over the workers."""
        return 1024 if text_len <= 100 else 64 if text_len <= 300 else 1

    def next(self, text_len: int, per_puzzle_s: float | None) -> int:
        """The size of the next chunk of puzzles about `text_len` characters long."""
        start = self.initial(text_len)
        if per_puzzle_s:
            want = max(1, round(self.target_s / per_puzzle_s))
            size = min(want, 2 * self.last if self.last else start)
        else:  # no feedback yet: grow blindly, but only so far
            size = min(2 * self.last, 8 * start) if self.last else start
        size = max(1, min(size, self.max_bytes // (text_len + 1), self.most))
        self.last = size
        return size


@dataclass
class _Run:
    """Consecutive puzzles read, waiting to be sent: texts (a slab's `SlabTexts` or a list), their
    positions among the job's puzzles and their lines (ranges for a slab: no number per puzzle)."""

    texts: Sequence[str]
    indices: Sequence[int]
    lines: Sequence[int]

    def cut(self, k: int) -> tuple[_Run, _Run]:
        """The first k puzzles, and the rest."""
        texts = self.texts
        if isinstance(texts, SlabTexts):
            head: Sequence[str] = SlabTexts(texts.joined(0, k), texts.length, k)
            tail: Sequence[str] = SlabTexts(texts.joined(k), texts.length, texts.count - k)
        else:
            head, tail = texts[:k], texts[k:]
        return _Run(head, self.indices[:k], self.lines[:k]), _Run(tail, self.indices[k:], self.lines[k:])

    def joined(self) -> tuple[str, list[int] | None]:
        """The texts joined by newlines, and the rows per text when some text has several."""
        if isinstance(self.texts, SlabTexts):
            return self.texts.text, None
        return join_texts(list(self.texts))


@dataclass
class _Pending:
    """Puzzles read but not yet sent (valid) or answered (invalid), of one input."""

    runs: deque[_Run] = field(default_factory=deque)  # valid puzzles, in input order
    count: int = 0  # puzzles in `runs`
    bad_texts: list[str] = field(default_factory=list)
    bad_indices: list[int] = field(default_factory=list)
    bad_lines: list[int] = field(default_factory=list)
    bad_errors: list[str] = field(default_factory=list)

    def add(self, texts: Sequence[str], indices: Sequence[int], lines: Sequence[int]) -> None:
        """Queue consecutive valid puzzles (single ones join the last run when it is a list)."""
        if not len(texts):
            return
        last = self.runs[-1] if self.runs else None
        if isinstance(texts, list) and last is not None and isinstance(last.texts, list):
            last.texts.extend(texts)
            last.indices.extend(indices)  # type: ignore[attr-defined]
            last.lines.extend(lines)  # type: ignore[attr-defined]
        elif isinstance(texts, SlabTexts):  # a slab's indices and lines are ranges
            self.runs.append(_Run(texts, indices, lines))
        else:
            self.runs.append(_Run(list(texts), list(indices), list(lines)))
        self.count += len(texts)

    def first_length(self) -> int:
        """The length of the first pending puzzle's text (chunk sizes follow it)."""
        texts = self.runs[0].texts
        return texts.length if isinstance(texts, SlabTexts) else len(texts[0])

    def take(self, size: int) -> list[_Run]:
        """The first `size` pending puzzles (all there are, if fewer), as runs."""
        out: list[_Run] = []
        while size > 0 and self.runs:
            run = self.runs.popleft()
            n = len(run.texts)
            if n > size:
                run, rest = run.cut(size)
                self.runs.appendleft(rest)
                n = size
            out.append(run)
            self.count -= n
            size -= n
        return out


def _joined(runs: list[_Run]) -> tuple[str, list[int] | None]:
    """The texts of runs joined by newlines, and the rows per text when some text has several."""
    parts = [run.joined() for run in runs]
    joined = parts[0][0] if len(parts) == 1 else "\n".join(text for text, _ in parts)
    if all(spans is None for _, spans in parts):
        return joined, None
    return joined, [
        n for run, (_, spans) in zip(runs, parts, strict=True) for n in spans or [1] * len(run.texts)
    ]


def _merged_runs(values: list[Sequence[int]]) -> list[tuple[int, int]]:
    """`to_runs` of sequences laid end to end (a range is one run: no number per puzzle)."""
    out: list[tuple[int, int]] = []
    for seq in values:
        pieces = [(seq.start, len(seq))] if isinstance(seq, range) and seq.step == 1 else to_runs(seq)
        for first, count in pieces:
            if out and out[-1][0] + out[-1][1] == first:
                out[-1] = (out[-1][0], out[-1][1] + count)
            elif count:
                out.append((first, count))
    return out


class Producer:
    """Reads the inputs of one job into chunk tasks and producer-answered results (`run`), or sends a
    generate plan's tasks (`run_plan`): either way each task is committed, then sent, within the window.

    `resume` (a checkpoint of an earlier producer of the job) skips the puzzles it covers,
    checking that the puzzle before it is the same one, and numbers chunks on from it.
    `token` is this producer's claim on the job (`JobStore.claim`; taken at start if None):
    once another producer claims the job, this one stops at its next commit. `window` bounds
    the chunks sent and not yet `consumed` (default: whose result has not arrived).
    """

    def __init__(
        self,
        spec: JobSpec,
        store: JobStore,
        transport: Transport,
        settings: ClientSettings,
        window: Callable[[], int] | None = None,
        *,
        resume: Checkpoint | None = None,
        token: str | None = None,
        consumed: Callable[[], int] | None = None,
    ) -> None:
        self.spec = spec
        self.store = store
        self.transport = transport
        self.settings = settings
        self.window = window  # max chunks in flight (None: send everything at once)
        self.consumed = consumed  # chunks taken off the window (None: those whose result arrived)
        self.sizer = ChunkSizer(settings.chunk_seconds, settings.max_chunk_bytes)
        self.split_sizer = ChunkSizer(
            settings.chunk_seconds, settings.max_split_bytes, MAX_SPLIT_ENTRIES // 2
        )
        self.storage: Storage | None = None  # a dataset job's: where the producer's own answers are written
        self.resume = resume
        self.checkpoint = resume or Checkpoint()  # the last one committed
        self.token = token
        self.index = 0  # puzzles read (including those a resume skips)
        self.chunks = self.checkpoint.chunks  # chunk ids used (tasks and producer answers)
        self.sent = 0  # chunk tasks sent by this producer
        self._size: int | None = None  # size of the next chunk, decided once per chunk
        self._beat = 0.0
        self.stopping = threading.Event()  # set by `stop` (Job.cancel): stop reading
        self._fail_on_stop = True

    def stop(self, fail: bool = True) -> None:
        """Stop reading at the next block or chunk: the job is marked failed when `fail`, else it stays
        as it is, its checkpoint resumable (an interrupted command: `submit --resume` goes on)."""
        self._fail_on_stop = fail
        self.stopping.set()
        self.transport.stop()

    def run(self, sources: list[tuple[str, Source]]) -> int:
        """Read every source in order; return the number of puzzles. Marks the job failed on error.

        A producer taken over by a resume (Superseded) or given the wrong inputs to resume
        (ResumeRefused) leaves the job as it is, for the right producer to finish.
        """

        if self.spec.splits is not None:
            self._produce(lambda: self._split_all([name for name, _ in sources]))
            return self.index

        def read() -> dict[str, str]:
            for name, source in sources:
                self._read(name, source)
            if self.index < self.checkpoint.index:
                raise ResumeRefused(
                    f"the inputs hold {self.index} puzzles, fewer than the {self.checkpoint.index} submitted"
                )
            return {"total": str(self.index), "submitted": str(self.index)}

        self._produce(read)
        return self.index

    def run_plan(self, tasks: Iterable[GenerateTask]) -> int:
        """Commit and send planned tasks in order (a generate run: chunk ids are the plan's); return how many.

        The checkpoint counts the planned puzzles sent; a generate run is not resumed (run it again).
        """

        def send() -> dict[str, str]:
            for task in tasks:
                self._wait_for_room()
                self.chunks = task.chunk + 1
                self.index += len(task)
                self._emit(task, Checkpoint(index=self.index, chunks=self.chunks))
            return {"submitted": str(self.index)}

        self._produce(send)
        return self.chunks

    def _produce(self, produce: Callable[[], dict[str, str]]) -> None:
        """Claim the job, run `produce` (it returns the final metadata fields), then say the job is produced.

        Failures mark the job failed, a cancel marks it cancelled (or leaves it resumable);
        a producer taken over by a resume or refused one leaves the job as it is.
        """
        try:
            if self.token is None:
                self.token = self.store.claim(self.spec.job)
            if self.resume is not None:
                self._commit(
                    self.checkpoint,
                    {"state": "producing", "error": "", "producer_beat": f"{time.time():.3f}"},
                )
            fields = produce()
            self._commit(
                self.checkpoint,
                {
                    "state": "produced",
                    **fields,
                    "chunks_total": str(self.chunks),
                    "chunks_sent": str(self.chunks),
                },
            )
        except (Superseded, ResumeRefused):
            raise
        except JobCancelled:
            if self._fail_on_stop:  # on purpose: `status` says cancelled, never "resume it"
                self._fail("the job was cancelled", {"cancelled": f"{time.time():.3f}"})
            else:
                self.leave()
            raise
        except BaseException as exc:
            self._fail(f"the producer stopped: {type(exc).__name__}: {exc}")
            raise

    def leave(self) -> None:
        """Say this producer is gone (beat at 0), so a resume may take the submission over at once.

        Called by the producer once stopped, or by the command for a producer stopped but still
        blocked (in a read or a send): it beats no more once stopped, and a resume's claim fences
        off whatever it would still commit.
        """
        try:
            if self.token is not None and self.store.owns(self.spec.job, self.token):
                self.store.update(self.spec.job, {"producer_beat": "0"})
        except Exception as exc:  # noqa: BLE001 - the store may be away: a resume waits for the beat to age
            log.warning("job %s: the producer's leaving is not recorded: %s", self.spec.job, exc)

    def _fail(self, reason: str, fields: dict[str, str] | None = None) -> None:
        """Mark the job failed with `reason`, unless another producer took it over (the store may be down)."""
        try:
            if self.token is None or self.store.owns(self.spec.job, self.token):
                self.store.update(self.spec.job, {"state": "failed", "error": reason[:500], **(fields or {})})
        except Exception as exc:  # noqa: BLE001 - the store may be what failed: the caller still gets its error
            log.warning("job %s: not marked failed (%s): %s", self.spec.job, reason[:200], exc)

    def _read(self, name: str, source: Source) -> None:
        """Read one input into pending chunks; puzzles before a resumed checkpoint are only counted."""
        pending = _Pending()
        skip = self.resume.index if self.resume is not None else 0
        blocks = read_blocks(source, self.spec.box, check=False, column=self.spec.column)
        for block in blocks:  # each puzzle is checked once: where it is parsed
            if self.stopping.is_set():
                raise JobCancelled("the job was cancelled")
            first = self.index
            self.index += len(block)
            if first < skip <= self.index:  # the checkpoint falls in this block: same puzzle before it?
                at = skip - first - 1
                self._check_tail(block.texts[at], f"{name}:{block.lines[at]}")
            lo = max(0, skip - first)  # rows of this block submitted before
            if lo >= len(block):
                self._heartbeat()
                continue
            if block.all_valid:
                texts = block.texts
                if isinstance(texts, SlabTexts):  # a slab of lines: passed on as one text
                    texts = SlabTexts(texts.joined(lo), texts.length, len(texts) - lo) if lo else texts
                else:
                    texts = texts[lo:]
                pending.add(texts, range(first + lo, self.index), block.lines[lo:])
            else:
                rows = zip(block.lines[lo:], block.texts[lo:], block.errors[lo:], strict=True)
                for i, (line, text, error) in enumerate(rows, start=first + lo):
                    if error is None:
                        pending.add([text], [i], [line])
                    else:
                        pending.bad_texts.append(text)
                        pending.bad_indices.append(i)
                        pending.bad_lines.append(line)
                        pending.bad_errors.append(error)
            while pending.count and pending.count >= self._next_size(pending):
                self._send(name, pending)
            if len(pending.bad_texts) >= MAX_ANSWERED:
                self._flush(name, pending)
            self._heartbeat()
        self._flush(name, pending)

    def _split_all(self, names: list[str]) -> dict[str, str]:
        """Send every input as byte-range splits the workers read (`pipeline.engine.splits`): nothing is read
        here
        but the first megabyte of each input, for the length of its lines. The job's total is known once
        the workers have counted every split (`JobStore.split_total`)."""
        assert self.spec.splits is not None
        at_input, at_byte = (self.checkpoint.input, self.checkpoint.offset) if self.resume else (0, 0)
        for i, (name, url) in enumerate(zip(names, self.spec.splits, strict=True)):
            if i < at_input:
                continue
            store = storage_for(url)
            stat = store.stat(url)  # size and stamp: a worker refuses to read another version of the file
            size = stat.size
            with store.open_read(url) as f:
                head = f.read(HEAD_BYTES)
            line_bytes = max(1.0, len(head) / max(1, head.count(b"\n")))
            column = csv_field(head, self.spec.column, name, len(head) < HEAD_BYTES)  # all its splits read it
            at = at_byte if i == at_input else 0
            while at < size:
                if self.stopping.is_set():
                    raise JobCancelled("the job was cancelled")
                self._wait_for_room()
                want = self._split_bytes(line_bytes)
                end = size if size - at <= want + want // 4 else at + want
                chunk = self._next_chunk()
                task = ChunkTask(
                    job=self.spec.job, chunk=chunk, input=name, index_runs=[], line_runs=[], puzzles="",
                    split=InputRange(
                        url=url, input=i, start=at, end=end, size=size, stamp=stat.stamp or None,
                        column=column,
                    ),
                    **self._options(chunk),
                )  # fmt: skip
                self._emit(task, Checkpoint(chunks=self.chunks, input=i, offset=end))
                at = end
            self._heartbeat()
        return {"submitted_bytes": "1"}

    def _split_bytes(self, line_bytes: float) -> int:
        """The next split's bytes: the puzzles the sizer wants (from the workers' feedback) times the lines'
        length; at most `max_split_bytes`."""
        n, cpu = self.store.hint(self.spec.job) if self.sent or self.resume else (0, 0.0)
        text_len = max(1, round(line_bytes) - 1)
        puzzles = self.split_sizer.next(text_len, cpu / n if n and cpu > 0 else None)
        return max(1, min(self.settings.max_split_bytes, int(puzzles * line_bytes)))

    def _options(self, chunk: int) -> dict[str, Any]:
        """What every task of the job carries beside its puzzles."""
        dataset = self.spec.task_dataset()
        return {
            "box": self.spec.box,
            "time_limit": self.spec.time_limit,
            "portfolio": self.spec.portfolio,
            "seed": solver_seed(self.spec.job if self.spec.seed is None else str(self.spec.seed), chunk),
            "escalate_after": self.spec.escalate_after or None,
            "format": "columns"
            if dataset is not None
            else self.spec.format,  # a dataset's parts: in the file
            "dataset": dataset,
        }

    def _check_tail(self, text: str, where: str) -> None:
        """Refuse to resume unless the puzzle just before the checkpoint is the one submitted there."""
        if self.resume is not None and digest(text) != self.resume.tail:
            raise ResumeRefused(f"{where}: not the puzzle submitted there: these are not the job's inputs")

    def _next_size(self, pending: _Pending) -> int:
        """The next chunk's size, from the workers' feedback so far (one store read per chunk)."""
        if self._size is None:
            n, cpu = self.store.hint(self.spec.job) if self.sent or self.resume else (0, 0.0)
            self._size = self.sizer.next(pending.first_length(), cpu / n if n and cpu > 0 else None)
        return self._size

    def _send(self, name: str, pending: _Pending) -> None:
        """Commit and send the next chunk of pending puzzles, with the invalid lines before its last one.

        Afterwards exactly the puzzles up to the chunk's last one are submitted: the checkpoint.
        """
        self._wait_for_room()
        size = self._next_size(pending)
        self._size = None
        runs = pending.take(size)
        last_index, last_text = runs[-1].indices[-1], runs[-1].texts[-1]
        answered = self._answered(name, pending, below=last_index)
        joined, spans = _joined(runs)
        chunk = self._next_chunk()
        task = ChunkTask(
            job=self.spec.job, chunk=chunk, input=name,
            index_runs=_merged_runs([r.indices for r in runs]),
            line_runs=_merged_runs([r.lines for r in runs]),
            puzzles=joined, spans=spans, **self._options(chunk),
        )  # fmt: skip
        self._emit(
            task, Checkpoint(index=last_index + 1, chunks=self.chunks, tail=digest(last_text)), answered
        )

    def _emit(
        self, task: ChunkTask | GenerateTask, checkpoint: Checkpoint, answered: Part | None = None
    ) -> None:
        """Commit `task` (with the answers before it, and the checkpoint past it), then send it."""
        self._commit(checkpoint, None, answered, task)
        self.transport.send(task)
        self.sent += 1
        self._heartbeat()

    def _flush(self, name: str, pending: _Pending) -> None:
        """Send every pending puzzle, then answer the invalid lines after it: all read is submitted."""
        while pending.count:
            self._send(name, pending)
        if pending.bad_texts:
            last, tail = pending.bad_indices[-1], pending.bad_texts[-1]
            answered = self._answered(name, pending, below=last + 1)
            self._commit(Checkpoint(index=last + 1, chunks=self.chunks, tail=digest(tail)), None, answered)

    def _answered(self, name: str, pending: _Pending, below: int) -> Part | None:
        """The `invalid` results of the pending invalid lines before index `below` as one chunk, or None."""
        k = bisect.bisect_left(pending.bad_indices, below)
        if k == 0:
            return None
        dataset = self.spec.task_dataset()
        result = answered_chunk(
            self.spec.job,
            self._next_chunk(),
            name,
            pending.bad_indices[:k],
            pending.bad_lines[:k],
            pending.bad_texts[:k],
            pending.bad_errors[:k],
            "columns" if dataset is not None else self.spec.format,
        )
        del pending.bad_indices[:k], pending.bad_lines[:k], pending.bad_texts[:k], pending.bad_errors[:k]
        return result

    def _commit(
        self,
        checkpoint: Checkpoint,
        fields: dict[str, str] | None = None,
        answered: Part | None = None,
        task: ChunkTask | GenerateTask | None = None,
    ) -> None:
        """Store answered results, keep the task, move the checkpoint: at once (Superseded if taken over)."""
        assert self.token is not None
        staged = None
        dataset = self.spec.task_dataset()
        if answered is not None and dataset is not None:  # the producer's own answers: a part file too
            if self.storage is None:
                self.storage = storage_for(dataset.url)
            staged = stage_part(self.storage, dataset, answered)
            answered = staged.part
        self.store.commit(self.spec.job, self.token, checkpoint, fields, answered, task)
        if staged is not None and dataset is not None and self.storage is not None:
            commit_part(self.storage, dataset.url, staged.temp, staged.name)
        self.checkpoint = checkpoint

    def _next_chunk(self) -> int:
        chunk = self.chunks
        self.chunks += 1
        return chunk

    def _wait_for_room(self) -> None:
        """Block while the window of chunks in flight is full (bounded memory and queue)."""
        if self.window is None:
            return
        while True:
            if self.stopping.is_set():
                raise JobCancelled("the job was cancelled")
            broken = self.transport.broken
            if broken:
                raise RuntimeError(broken)
            done = self.consumed() if self.consumed is not None else self.store.arrived_count(self.spec.job)
            if self.chunks - done < self.window():
                return
            self.store.wait(self.spec.job, self.settings.poll_interval)
            self._heartbeat()

    def _heartbeat(self) -> None:
        """Tell collectors the producer is alive and how far it got (at most once a second)."""
        now = time.time()
        if now - self._beat >= 1.0 and not self.stopping.is_set():  # stopped: it may have said it left
            self._beat = now
            self.store.update(
                self.spec.job,
                {
                    "producer_beat": f"{now:.3f}",
                    "submitted": str(self.index),
                    "chunks_sent": str(self.chunks),
                },
            )
