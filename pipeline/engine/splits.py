"""A split of an input, read by the worker that solves it: the lines whose first byte falls in its bytes
(Hadoop's rule: each line in one split), its puzzles then its invalid lines, numbered from its start."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO

from pipeline.contract.runs import Runs, join_texts
from pipeline.contract.tasks import MAX_SPLIT_ENTRIES, ChunkTask, InputRange
from pipeline.engine.inputs import SLAB
from pipeline.engine.reader import read_lines
from pipeline.engine.storage import Storage, StorageError, reason, storage_for

SCAN = 1 << 16  # bytes read at a time looking for a line's end


class SplitTooLarge(ValueError):
    """A split holds more puzzle lines than a worker takes at once (the input's lines are very short)."""


@dataclass
class SplitRead:
    """A split read and checked: the chunk's task with its rows, and what the split holds."""

    task: ChunkTask  # rows: the puzzles, then the invalid lines; runs relative to the split
    valid: int  # rows [0, valid) are puzzles to solve, rows [valid, len(task)) invalid lines
    reasons: list[str]  # why each invalid line is (rows valid..)
    lines: int  # lines the split owns: the next split of the same input starts this many lines later

    @property
    def entries(self) -> int:
        """Puzzles and invalid lines: the next split's first index is this many further."""
        return len(self.task)


class _Owned:
    """The bytes of the lines a split owns, as a stream: from its first line's start through the end of
    the line holding byte `end - 1` (or the file's end)."""

    def __init__(self, raw: IO[bytes], first: int, end: int) -> None:
        self.raw = raw
        self.pos = first
        self.end = end
        self.done = first >= end
        self.newlines = 0
        self.last = b"\n"  # the last byte handed out (a line without its newline ends the file)
        if not self.done:
            raw.seek(first)

    def read(self, n: int = SLAB) -> bytes:
        if self.done:
            return b""
        inside = self.pos < self.end
        data = self.raw.read(min(n, self.end - self.pos) if inside else min(n, SLAB))
        if not data:
            self.done = True
            return b""
        cut = -1 if inside else data.find(b"\n")  # past the range: finishing the line that began inside it
        if cut >= 0:
            data, self.done = data[: cut + 1], True
        self.pos += len(data)
        if inside and self.pos >= self.end and data.endswith(b"\n"):
            self.done = True
        self.newlines += data.count(b"\n")
        self.last = data[-1:]
        return data

    @property
    def lines(self) -> int:
        """Lines handed out so far (a last one without a newline counts)."""
        return self.newlines + (self.last != b"\n")


def first_line_start(raw: IO[bytes], start: int, end: int) -> int:
    """Where the first line starting in `[start, end)` begins (`end` when none does)."""
    if start == 0:
        return 0
    raw.seek(start - 1)
    at = start - 1
    while at < end:
        data = raw.read(SCAN)
        if not data:
            return end
        cut = data.find(b"\n")
        if cut >= 0:
            return min(at + cut + 1, end)
        at += len(data)
    return end


def read_split(task: ChunkTask) -> SplitRead:
    """Read and check the lines split `task.split` owns; StorageError (one line naming the input) when it
    cannot be read or is not the input submitted (before and after), SplitTooLarge past MAX_SPLIT_ENTRIES."""
    split = task.split
    if split is None:
        raise ValueError("not a split task")
    store = storage_for(split.url)
    check_input(store, split)
    try:
        with store.open_read(split.url) as raw:
            read = _read(task, split, raw)
    except StorageError:
        raise
    except OSError as exc:
        raise StorageError(f"cannot read {split.url}: {reason(exc)}") from None
    check_input(store, split)  # rewritten while it was read: the lines read may mix both versions
    return read


def check_input(store: Storage, split: InputRange) -> None:
    """StorageError (one line naming the input, never its size) unless the input is the file submitted: its
    size and stamp unchanged (a file rewritten in place would mix both versions in one job)."""
    try:
        stat = store.stat(split.url)
    except OSError as exc:
        raise StorageError(f"cannot read the input {split.url}: {reason(exc)}") from None
    if stat.size != split.size or (split.stamp is not None and stat.stamp != split.stamp):
        raise StorageError(
            f"the input {split.url} changed since the job was submitted (its size or modification time "
            "differs): its lines can no longer be read as submitted"
        )


def _read(task: ChunkTask, split: InputRange, raw: IO[bytes]) -> SplitRead:
    owned = _Owned(raw, first_line_start(raw, split.start, split.end), split.end)
    good, bad = _Rows(), _Rows()
    reasons: list[str] = []
    k = 0
    blocks = read_lines(owned, task.box, opening=split.start == 0, column=split.column)  # type: ignore[arg-type]
    for block in blocks:
        n = len(block)
        if block.all_valid:
            good.add(k, n, block.lines, block.texts)
        else:
            for i, (line, text, error) in enumerate(zip(block.lines, block.texts, block.errors, strict=True)):
                (good if error is None else bad).add(k + i, 1, [line], [text])
                if error is not None:
                    reasons.append(error)
        k += n
        if k > MAX_SPLIT_ENTRIES:
            raise SplitTooLarge(
                f"{split.url} bytes {split.start}-{split.end} hold over {MAX_SPLIT_ENTRIES:,} lines: "
                "the input's lines are too short for its splits"
            )
    joined, spans = join_texts(good.texts + bad.texts)
    read = task.model_copy(
        update={
            "index_runs": good.index + bad.index,
            "line_runs": good.line + bad.line,
            "puzzles": joined,
            "spans": spans,
        }
    )  # a copy is not validated again: its split stays, its rows are now known
    return SplitRead(read, len(good.texts), reasons, owned.lines)


@dataclass
class _Rows:
    """Texts and (first, count) runs of relative indices and lines, grown a row or a run at a time."""

    texts: list[str] = field(default_factory=list)
    index: Runs = field(default_factory=list)
    line: Runs = field(default_factory=list)

    def add(self, index: int, count: int, lines: Sequence[int], texts: Sequence[str]) -> None:
        self.texts.extend(texts)
        _extend(self.index, index, count)
        for first, run in [(lines[0], count)] if isinstance(lines, range) else ((line, 1) for line in lines):
            _extend(self.line, first, run)  # a uniform slab's lines are a range: one run


def _extend(runs: Runs, first: int, count: int) -> None:
    """Append a run, merged with the last one when it goes on from it."""
    if runs and runs[-1][0] + runs[-1][1] == first:
        runs[-1] = (runs[-1][0], runs[-1][1] + count)
    else:
        runs.append((first, count))
