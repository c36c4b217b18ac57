"""The producer: stream inputs, answer invalid lines itself, send the rest in sized chunks.

Nothing is held beyond the chunk being filled (and, with a window, the chunks in
flight), so a corpus of any length streams through. Every puzzle read gets an index
and exactly one answer: either an `invalid` result written straight to the store, or a
place in a chunk task.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from client.config import ClientSettings
from client.reader import read_blocks
from client.store import JobStore
from client.transport import Transport
from solvers.chunk import MAX_CHUNK_PUZZLES, ChunkTask, answered_chunk, chunk_seed, join_texts, to_runs

Source = str | Path | IO[bytes] | Iterable[str]
MAX_ANSWERED = 1000  # invalid lines buffered before the producer writes their results


class JobCancelled(RuntimeError):
    """The job was cancelled while its input was being read."""


def new_job_id() -> str:
    """A fresh job id (uuid4 hex)."""
    return uuid.uuid4().hex


@dataclass
class JobSpec:
    """What a job solves and how."""

    job: str
    inputs: list[str]
    box: str | None = None
    time_limit: float | None = None
    portfolio: str | None = None

    def meta(self) -> dict[str, str]:
        """The job's metadata as stored (strings only)."""
        out = {"created": f"{time.time():.6f}", "state": "producing", "inputs": "\n".join(self.inputs)}
        for key in ("box", "time_limit", "portfolio"):
            value = getattr(self, key)
            if value is not None:
                out[key] = str(value)
        return out


class ChunkSizer:
    """Chunk sizes aiming at `target_s` of solving each, learnt from the results that came back.

    Before any feedback the size starts small for the grid size and doubles per chunk;
    with feedback it follows target / (CPU seconds per puzzle), growing at most 2x per
    chunk (so small jobs still spread over the workers) and bounded by the payload size.
    """

    def __init__(self, target_s: float, max_bytes: int) -> None:
        self.target_s = target_s
        self.max_bytes = max_bytes
        self.last = 0

    @staticmethod
    def initial(text_len: int) -> int:
        """A first chunk of well under a second whatever the grid size (text length ~ cells)."""
        return 1024 if text_len <= 100 else 64 if text_len <= 300 else 8 if text_len <= 700 else 2

    def next(self, text_len: int, per_puzzle_s: float | None) -> int:
        """The size of the next chunk of puzzles about `text_len` characters long."""
        start = self.initial(text_len)
        if per_puzzle_s:
            want = max(1, round(self.target_s / per_puzzle_s))
            size = min(want, 2 * self.last if self.last else start)
        else:  # no feedback yet: grow blindly, but only so far
            size = min(2 * self.last, 8 * start) if self.last else start
        size = max(1, min(size, self.max_bytes // (text_len + 1), MAX_CHUNK_PUZZLES))
        self.last = size
        return size


@dataclass
class _Pending:
    """Puzzles read but not yet sent (valid) or answered (invalid), of one input."""

    texts: list[str] = field(default_factory=list)
    indices: list[int] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    bad_texts: list[str] = field(default_factory=list)
    bad_indices: list[int] = field(default_factory=list)
    bad_lines: list[int] = field(default_factory=list)
    bad_errors: list[str] = field(default_factory=list)


class Producer:
    """Reads the inputs of one job into chunk tasks and producer-answered results."""

    def __init__(
        self,
        spec: JobSpec,
        store: JobStore,
        transport: Transport,
        settings: ClientSettings,
        window: Callable[[], int] | None = None,
        outbox: Callable[[ChunkTask], None] | None = None,
    ) -> None:
        self.spec = spec
        self.store = store
        self.transport = transport
        self.settings = settings
        self.window = window  # max chunks in flight (None: send everything at once)
        self.outbox = outbox  # keeps each task before it is sent (broker: for re-sending lost ones)
        self.sizer = ChunkSizer(settings.chunk_seconds, settings.max_chunk_bytes)
        self.index = 0
        self.chunks = 0  # chunk ids used (tasks and producer answers)
        self.sent = 0  # chunk tasks sent
        self._size: int | None = None  # size of the next chunk, decided once per chunk
        self._beat = 0.0
        self.stopping = threading.Event()  # set by Job.cancel(): stop reading, fail the job

    def run(self, sources: list[tuple[str, Source]]) -> int:
        """Read every source in order; return the number of puzzles. Marks the job failed on error."""
        try:
            for name, source in sources:
                self._read(name, source)
            self.store.update(
                self.spec.job,
                {"state": "produced", "total": str(self.index), "submitted": str(self.index),
                 "chunks_total": str(self.chunks), "chunks_sent": str(self.chunks)},
            )  # fmt: skip
        except BaseException as exc:
            reason = f"the producer stopped: {type(exc).__name__}: {exc}"[:500]
            self.store.update(self.spec.job, {"state": "failed", "error": reason})
            raise
        return self.index

    def _read(self, name: str, source: Source) -> None:
        pending = _Pending()
        for block in read_blocks(source, self.spec.box):
            if self.stopping.is_set():
                raise JobCancelled("the job was cancelled")
            first = self.index
            self.index += len(block)
            if block.all_valid:
                pending.texts.extend(block.texts)
                pending.indices.extend(range(first, self.index))
                pending.lines.extend(block.lines)
            else:
                for i, (line, text, error) in enumerate(
                    zip(block.lines, block.texts, block.errors, strict=True), start=first
                ):
                    if error is None:
                        pending.texts.append(text)
                        pending.indices.append(i)
                        pending.lines.append(line)
                    else:
                        pending.bad_texts.append(text)
                        pending.bad_indices.append(i)
                        pending.bad_lines.append(line)
                        pending.bad_errors.append(error)
            while pending.texts and len(pending.texts) >= self._next_size(pending):
                self._send(name, pending)
            if len(pending.bad_texts) >= MAX_ANSWERED:
                self._answer(name, pending)
        while pending.texts:
            self._send(name, pending)
        self._answer(name, pending)

    def _next_size(self, pending: _Pending) -> int:
        """The next chunk's size, from the workers' feedback so far (one store read per chunk)."""
        if self._size is None:
            n, cpu = self.store.hint(self.spec.job) if self.sent else (0, 0.0)
            self._size = self.sizer.next(len(pending.texts[0]), cpu / n if n and cpu > 0 else None)
        return self._size

    def _send(self, name: str, pending: _Pending) -> None:
        """Send the next chunk of pending puzzles as one task (after answering earlier invalid ones)."""
        self._answer(name, pending)
        self._wait_for_room()
        size = self._next_size(pending)
        self._size = None
        texts, indices, lines = pending.texts[:size], pending.indices[:size], pending.lines[:size]
        del pending.texts[:size], pending.indices[:size], pending.lines[:size]
        joined, spans = join_texts(texts)
        chunk = self._next_chunk()
        task = ChunkTask(
            job=self.spec.job,
            chunk=chunk,
            input=name,
            index_runs=to_runs(indices),
            line_runs=to_runs(lines),
            puzzles=joined,
            spans=spans,
            box=self.spec.box,
            time_limit=self.spec.time_limit,
            portfolio=self.spec.portfolio,
            seed=chunk_seed(self.spec.job, chunk),
        )
        if self.outbox is not None:
            self.outbox(task)
        self.transport.send(task)
        self.sent += 1
        self._heartbeat()

    def _answer(self, name: str, pending: _Pending) -> None:
        """Write the pending invalid lines' results to the store (no round trip to a worker)."""
        if not pending.bad_texts:
            return
        result = answered_chunk(
            self.spec.job,
            self._next_chunk(),
            name,
            pending.bad_indices,
            pending.bad_lines,
            pending.bad_texts,
            pending.bad_errors,
        )
        self.store.put_result(self.spec.job, result)
        pending.bad_texts, pending.bad_indices, pending.bad_lines, pending.bad_errors = [], [], [], []

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
            if self.chunks - self.store.arrived_count(self.spec.job) < self.window():
                return
            self.store.wait(self.spec.job, self.settings.poll_interval)
            self._heartbeat()

    def _heartbeat(self) -> None:
        """Tell collectors the producer is alive and how far it got (at most once a second)."""
        now = time.time()
        if now - self._beat >= 1.0:
            self._beat = now
            self.store.update(
                self.spec.job,
                {
                    "producer_beat": f"{now:.3f}",
                    "submitted": str(self.index),
                    "chunks_sent": str(self.chunks),
                },
            )
