"""Runs of consecutive integers, and puzzle texts joined into one string: how a chunk names its puzzles.

A chunk's puzzles are mostly consecutive lines of one input, so their positions and line numbers travel as
`(first, count)` runs, and their texts as one newline-joined string (`spans` when a puzzle has several rows).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Runs = list[tuple[int, int]]


def to_runs(values: Sequence[int] | np.ndarray) -> Runs:
    """Increasing integers (a sequence or an int array) as (first, count) runs of consecutive values."""
    if len(values) == 0:
        return []
    arr = np.asarray(values, dtype=np.int64)
    breaks = np.flatnonzero(np.diff(arr) != 1) + 1
    starts = np.concatenate(([0], breaks))
    counts = np.diff(np.concatenate((starts, [len(arr)])))
    return list(zip(arr[starts].tolist(), counts.tolist(), strict=True))


def expand_runs(runs: Runs) -> list[int]:
    """Invert `to_runs`."""
    return [k for first, count in runs for k in range(first, first + count)]


def runs_array(runs: Runs) -> np.ndarray:
    """`expand_runs` as an int64 array (vectorised)."""
    if not runs:
        return np.zeros(0, np.int64)
    firsts, counts = np.array(runs, dtype=np.int64).reshape(-1, 2).T
    starts = np.cumsum(counts) - counts
    return np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(firsts - starts, counts)


def overlaps(runs: Runs, others: Runs) -> bool:
    """True when any integer lies in a run of both (each list sorted, its runs disjoint): a part some of
    whose rows are answered already."""
    i = j = 0
    while i < len(runs) and j < len(others):
        (a, n), (b, m) = runs[i], others[j]
        if a < b + m and b < a + n:
            return True
        if a + n <= b + m:
            i += 1
        else:
            j += 1
    return False


def join_texts(texts: list[str]) -> tuple[str, list[int] | None]:
    """Join puzzle texts with newlines; return the rows per text when some text has several."""
    joined = "\n".join(texts)
    if not texts or joined.count("\n") == len(texts) - 1:
        return joined, None
    return joined, [t.count("\n") + 1 for t in texts]


def split_texts(joined: str, spans: list[int] | None, count: int) -> list[str]:
    """Invert `join_texts`."""
    if count == 0:
        return []
    parts = joined.split("\n")
    if spans is None:
        return parts
    out: list[str] = []
    at = 0
    for span in spans:
        out.append("\n".join(parts[at : at + span]))
        at += span
    return out
