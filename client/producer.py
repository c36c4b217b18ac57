"""The producer: stream inputs (holding only the chunk being filled and the window in flight), answer invalid
lines itself, send the rest in sized chunks, each committed before it is sent: the checkpoint names a fully
submitted prefix of the input (docs/decisions.md)."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from client.config import ClientSettings
from client.pending import ChunkSizer, Pending, joined_runs, merged_runs
from client.plan import HEAD_BYTES, JobSpec, ResumeRefused, Source
from client.store import CANCELLED, Checkpoint, JobStore, Superseded
from client.transport import Transport
from pipeline.contract.part import Part
from pipeline.contract.tasks import MAX_SPLIT_ENTRIES, ChunkTask, InputRange, solver_seed
from pipeline.engine.dataset import commit_part, stage_part
from pipeline.engine.inputs import csv_field
from pipeline.engine.lines import SlabTexts
from pipeline.engine.reader import read_blocks
from pipeline.engine.solve import answered_chunk
from pipeline.engine.storage import Storage, storage_for

if TYPE_CHECKING:
    from pipeline.contract.generate import GenerateTask

log = logging.getLogger(__name__)

MAX_ANSWERED = 1000  # invalid lines buffered before the producer writes their results


class JobCancelled(RuntimeError):
    """The job was cancelled while its input was being read."""


def digest(text: str) -> str:
    """A short digest of one puzzle's text (the checkpoint's `tail`)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class Producer:
    """Reads a job's inputs into chunk tasks and its own answers (`run`), or sends a generate plan's tasks
    (`run_plan`): each committed, then sent, within the `window` of chunks not yet `consumed`. `resume`: an
    earlier producer's checkpoint, checked and gone on from; `token`: this producer's claim
    (`JobStore.claim`), which another's claim revokes."""

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
        """Stop reading at the next block or chunk: the job is marked failed when `fail`, else left
        resumable."""
        self._fail_on_stop = fail
        self.stopping.set()
        self.transport.stop()

    def run(self, sources: list[tuple[str, Source]]) -> int:
        """Read every source in order; return the number of puzzles. The job fails on an error (not Superseded
        or ResumeRefused)."""

        def read() -> dict[str, str]:
            for name, source in sources:
                self._read(name, source)
            if self.index < self.checkpoint.index:
                raise ResumeRefused(
                    f"the inputs hold {self.index} puzzles, fewer than the {self.checkpoint.index} submitted"
                )
            return {"total": str(self.index), "submitted": str(self.index)}

        names = [name for name, _ in sources]
        self._produce(read if self.spec.splits is None else lambda: self._split_all(names))
        return self.index

    def run_plan(self, tasks: Iterable[GenerateTask]) -> int:
        """Commit and send planned tasks in order (chunk ids: the plan's); return how many (never resumed)."""

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
        """Claim the job, run `produce` (it returns the final metadata fields), then say the job is produced;
        a failure marks it failed, a cancel cancelled (or leaves it resumable)."""
        try:
            if self.token is None:
                self.token = self.store.claim(self.spec.job)
            if self.resume is not None:
                fresh = {"state": "producing", "error": "", "producer_beat": f"{time.time():.3f}"}
                self._commit(self.checkpoint, fresh)
            fields = {"state": "produced", **produce(), "chunks_total": str(self.chunks)}
            self._commit(self.checkpoint, {**fields, "chunks_sent": str(self.chunks)})
        except (Superseded, ResumeRefused):
            raise
        except JobCancelled:
            if self._fail_on_stop:  # on purpose: `status` says cancelled, never "resume it"
                self._fail(CANCELLED, {"cancelled": f"{time.time():.3f}"})
            else:
                self.leave()
            raise
        except BaseException as exc:
            self._fail(f"the producer stopped: {type(exc).__name__}: {exc}")
            raise

    def leave(self) -> None:
        """Say this producer is gone (beat 0), so a resume may take over at once (also for one stopped but
        blocked in a read or a send: it beats no more, and a resume's claim fences off its commits)."""
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
            # info: the command's one error line already says why the job ended
            log.info("job %s: not marked failed (%s): %s", self.spec.job, reason[:200], exc)

    def _read(self, name: str, source: Source) -> None:
        """Read one input into pending chunks; puzzles before a resumed checkpoint are only counted."""
        pending = Pending()
        skip, tail = (self.resume.index, self.resume.tail) if self.resume is not None else (0, "")
        blocks = read_blocks(source, self.spec.box, check=False, column=self.spec.column)
        for block in blocks:  # each puzzle is checked once: where it is parsed
            if self.stopping.is_set():
                raise JobCancelled("the job was cancelled")
            first = self.index
            self.index += len(block)
            at = skip - first - 1  # the puzzle before the checkpoint: in this block, is it the one submitted?
            if first < skip <= self.index and digest(block.texts[at]) != tail:
                where = f"{name}:{block.lines[at]}: not the puzzle submitted there"
                raise ResumeRefused(f"{where}: these are not the job's inputs")
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
                        pending.bad.append((i, line, text, error))
            while pending.count and pending.count >= self._next_size(pending):
                self._send(name, pending)
            if len(pending.bad) >= MAX_ANSWERED:
                self._flush(name, pending)
            self._heartbeat()
        self._flush(name, pending)

    def _split_all(self, names: list[str]) -> dict[str, str]:
        """Send every input as byte-range splits the workers read and count: only the first MB of each is read
        here (its lines' length)."""
        assert self.spec.splits is not None
        at_input, at_byte = (self.checkpoint.input, self.checkpoint.offset) if self.resume else (0, 0)
        for i, (name, url) in enumerate(zip(names, self.spec.splits, strict=True)):
            if i < at_input:
                continue
            store = storage_for(url)
            stat = store.stat(url)  # size and stamp: a worker refuses to read another version of the file
            with store.open_read(url) as f:
                head = f.read(HEAD_BYTES)
            line_bytes = max(1.0, len(head) / max(1, head.count(b"\n")))
            column = csv_field(head, self.spec.column, name, len(head) < HEAD_BYTES)  # all its splits read it
            at = at_byte if i == at_input else 0
            while at < stat.size:
                if self.stopping.is_set():
                    raise JobCancelled("the job was cancelled")
                self._wait_for_room()
                puzzles = self.split_sizer.next(max(1, round(line_bytes) - 1), self._per_puzzle())
                want = max(1, min(self.settings.max_split_bytes, int(puzzles * line_bytes)))
                end = stat.size if stat.size - at <= want + want // 4 else at + want
                chunk = self._next_chunk()
                task = ChunkTask(
                    job=self.spec.job,
                    chunk=chunk,
                    input=name,
                    index_runs=[],
                    line_runs=[],
                    puzzles="",
                    split=InputRange(
                        url=url,
                        input=i,
                        start=at,
                        end=end,
                        size=stat.size,
                        stamp=stat.stamp or None,
                        column=column,
                    ),
                    **self._options(chunk),
                )
                self._emit(task, Checkpoint(chunks=self.chunks, input=i, offset=end))
                at = end
            self._heartbeat()
        return {"submitted_bytes": "1"}

    def _per_puzzle(self) -> float | None:
        """CPU seconds per puzzle the workers reported so far (one store read; None before any feedback)."""
        n, cpu = self.store.hint(self.spec.job) if self.sent or self.resume else (0, 0.0)
        return cpu / n if n and cpu > 0 else None

    def _options(self, chunk: int) -> dict[str, Any]:
        """What every task of the job carries beside its puzzles."""
        spec, dataset = self.spec, self.spec.task_dataset()
        return {
            "box": spec.box,
            "time_limit": spec.time_limit,
            "portfolio": spec.portfolio,
            "seed": solver_seed(spec.job if spec.seed is None else str(spec.seed), chunk),
            "escalate_after": spec.escalate_after or None,
            "format": "columns" if dataset is not None else spec.format,  # a dataset's parts: in the file
            "dataset": dataset,
        }

    def _next_size(self, pending: Pending) -> int:
        """The next chunk's size, from the workers' feedback so far (one store read per chunk)."""
        if self._size is None:
            self._size = self.sizer.next(pending.first_length(), self._per_puzzle())
        return self._size

    def _send(self, name: str, pending: Pending) -> None:
        """Commit and send the next chunk of pending puzzles, with the invalid lines before its last one (the
        checkpoint moves past it)."""
        self._wait_for_room()
        size = self._next_size(pending)
        self._size = None
        runs = pending.take(size)
        last_index, last_text = runs[-1].indices[-1], runs[-1].texts[-1]
        answered = self._answered(name, pending, below=last_index)
        joined, spans = joined_runs(runs)
        chunk = self._next_chunk()
        task = ChunkTask(
            job=self.spec.job,
            chunk=chunk,
            input=name,
            index_runs=merged_runs([r.indices for r in runs]),
            line_runs=merged_runs([r.lines for r in runs]),
            puzzles=joined,
            spans=spans,
            **self._options(chunk),
        )
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

    def _flush(self, name: str, pending: Pending) -> None:
        """Send every pending puzzle, then answer the invalid lines after it: all read is submitted."""
        while pending.count:
            self._send(name, pending)
        if pending.bad:
            last, _, tail, _ = pending.bad[-1]
            answered = self._answered(name, pending, below=last + 1)
            self._commit(Checkpoint(index=last + 1, chunks=self.chunks, tail=digest(tail)), None, answered)

    def _answered(self, name: str, pending: Pending, below: int) -> Part | None:
        """The `invalid` results of the pending invalid lines before index `below` as one chunk, or None."""
        bad = pending.take_bad(below)
        if not bad[0]:
            return None
        fmt = "columns" if self.spec.dataset is not None else self.spec.format
        return answered_chunk(self.spec.job, self._next_chunk(), name, *bad, fmt)

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
            self.storage = self.storage or storage_for(dataset.url)
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
            if self.transport.broken:
                raise RuntimeError(self.transport.broken)
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
            progress = {"submitted": str(self.index), "chunks_sent": str(self.chunks)}
            self.store.update(self.spec.job, {"producer_beat": f"{now:.3f}", **progress})
