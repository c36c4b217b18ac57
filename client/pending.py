"""Puzzles a producer has read and not yet sent, and the size of the next chunk: runs of valid puzzles
(a slab's joined text, or a list) cut into chunk tasks of the size `ChunkSizer` learns from the workers'
feedback, and the invalid lines waiting for their `invalid` answers."""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.contract.runs import join_texts, to_runs
from pipeline.contract.tasks import MAX_CHUNK_PUZZLES
from pipeline.engine.lines import SlabTexts


class ChunkSizer:
    """Chunk sizes aiming at `target_s` of solving each: small for the grid size, doubling per chunk until
    feedback, then target / (CPU seconds per puzzle), growing at most 2x per chunk (small jobs still spread
    over the workers), bounded by the payload size."""

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
class Run:
    """Consecutive puzzles read, waiting to be sent: texts (a slab's `SlabTexts` or a list), their
    positions among the job's puzzles and their lines (ranges for a slab: no number per puzzle)."""

    texts: Sequence[str]
    indices: Sequence[int]
    lines: Sequence[int]

    def cut(self, k: int) -> tuple[Run, Run]:
        """The first k puzzles, and the rest."""
        texts = self.texts
        if isinstance(texts, SlabTexts):
            head: Sequence[str] = SlabTexts(texts.joined(0, k), texts.length, k)
            tail: Sequence[str] = SlabTexts(texts.joined(k), texts.length, texts.count - k)
        else:
            head, tail = texts[:k], texts[k:]
        return Run(head, self.indices[:k], self.lines[:k]), Run(tail, self.indices[k:], self.lines[k:])

    def joined(self) -> tuple[str, list[int] | None]:
        """The texts joined by newlines, and the rows per text when some text has several."""
        if isinstance(self.texts, SlabTexts):
            return self.texts.text, None
        return join_texts(list(self.texts))


@dataclass
class Pending:
    """Puzzles read but not yet sent (valid) or answered (invalid), of one input."""

    runs: deque[Run] = field(default_factory=deque)  # valid puzzles, in input order
    count: int = 0  # puzzles in `runs`
    bad: list[tuple[int, int, str, str]] = field(default_factory=list)  # invalid: (index, line, text, error)

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
            self.runs.append(Run(texts, indices, lines))
        else:
            self.runs.append(Run(list(texts), list(indices), list(lines)))
        self.count += len(texts)

    def take_bad(self, below: int) -> tuple[list[int], list[int], list[str], list[str]]:
        """The pending invalid lines before index `below`: their indices, lines, texts and errors."""
        k = bisect.bisect_left(self.bad, (below,))  # (below,) sorts before every line of index `below`
        taken, self.bad[:k] = self.bad[:k], []
        columns = [list(column) for column in zip(*taken, strict=True)] or [[], [], [], []]
        return columns[0], columns[1], columns[2], columns[3]

    def first_length(self) -> int:
        """The length of the first pending puzzle's text (chunk sizes follow it)."""
        texts = self.runs[0].texts
        return texts.length if isinstance(texts, SlabTexts) else len(texts[0])

    def take(self, size: int) -> list[Run]:
        """The first `size` pending puzzles (all there are, if fewer), as runs."""
        out: list[Run] = []
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


def joined_runs(runs: list[Run]) -> tuple[str, list[int] | None]:
    """The texts of runs joined by newlines, and the rows per text when some text has several."""
    parts = [run.joined() for run in runs]
    joined = parts[0][0] if len(parts) == 1 else "\n".join(text for text, _ in parts)
    if all(spans is None for _, spans in parts):
        return joined, None
    return joined, [
        n for run, (_, spans) in zip(runs, parts, strict=True) for n in spans or [1] * len(run.texts)
    ]


def merged_runs(values: list[Sequence[int]]) -> list[tuple[int, int]]:
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
