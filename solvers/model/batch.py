"""A batch of puzzles read for solving: each text parsed and the puzzles grouped by (box, notation), so each
group goes to a kernel in one call; a line that is no puzzle answered `invalid` with why in the `Results`.
Compact lines of one length are read at once (`read_framed`, `parse_compact_batch`): no Python per puzzle."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from solvers.model.parse import Lines, parse_compact_batch, parse_puzzle, read_framed
from solvers.model.puzzle import ALPHABET, COMPACT, Box, Notation, Puzzle, PuzzleError
from solvers.model.result import Results, SolveResult
from solvers.model.status import Status

GroupKey = tuple[Box, Notation]


class Group(NamedTuple):
    """Puzzles of one (box, notation): their input positions (int64) and givens rows."""

    box: Box
    notation: Notation
    indices: np.ndarray
    givens: np.ndarray


class Groups:
    """Puzzles gathered by (box, notation): input indices and their givens rows."""

    def __init__(self) -> None:
        self.indices: dict[GroupKey, list[np.ndarray]] = {}
        self.givens: dict[GroupKey, list[np.ndarray]] = {}

    def add(self, key: GroupKey, indices: Sequence[int] | np.ndarray, givens: np.ndarray) -> None:
        """Add puzzles (givens: uint8[k, N*N]) found at `indices` of the input."""
        self.indices.setdefault(key, []).append(np.asarray(indices, dtype=np.int64).reshape(-1))
        self.givens.setdefault(key, []).append(givens)

    def items(self) -> Iterable[Group]:
        """Yield each group, its indices and givens stacked."""
        for key, indices in self.indices.items():
            one = len(indices) == 1
            givens = self.givens[key]
            yield Group(
                *key,
                indices[0] if one else np.concatenate(indices),
                givens[0] if one else np.concatenate(givens),
            )


def read_batch(items: Sequence[object], box: Box | None) -> tuple[Sequence[str], Results, Groups]:
    """The texts of `items` (stripped), their `Results` with every line that is no puzzle answered `invalid`,
    and the puzzles grouped (`Groups`)."""
    framed = _read_framed(items, box)
    if framed is not None:  # one compact puzzle a line, every line alike: read at once
        return framed
    if isinstance(items, Lines):
        items = list(items)
    all_text = set(map(type, items)) <= {str}
    texts = list(map(str.strip, items)) if all_text else [_strip(item) for item in items]  # type: ignore[arg-type]
    results = Results(texts)
    return texts, results, _parse_all(items, texts, box, results, all_text)


def _read_framed(items: Sequence[object], box: Box | None) -> tuple[Sequence[str], Results, Groups] | None:
    """The batch read at once when it is compact puzzles of one length, one per text (`Lines` or strs; the
    pipeline's chunks and most corpora): no Python per puzzle. None for anything else (`_parse_all`)."""
    if isinstance(items, Lines):
        text, count = items.text, len(items)
        cells = text.find("\n") if count > 1 else len(text)
    else:
        try:
            text = "\n".join(items)  # type: ignore[arg-type]  # TypeError: not all str
        except TypeError:
            return None
        count = len(items)
        cells = len(items[0]) if count else 0  # type: ignore[arg-type]
    group_box = box if box is not None else _inferred_box(cells)
    if count == 0 or group_box is None or group_box.cells != cells or group_box.n > len(ALPHABET):
        return None
    read = read_framed(text, count, cells, group_box.n)
    if read is None:
        return None
    givens, bad, symbols = read
    if isinstance(items, Lines):
        items.symbols = symbols  # the pipeline's puzzle column is cut from it, not from strs
    texts: Sequence[str] = items if isinstance(items, Lines) else list(items)  # type: ignore[arg-type]
    slow = np.flatnonzero(bad).tolist()  # read again the slow way, stripped, for the reason
    if slow:
        texts = list(texts)
        for i in slow:
            texts[i] = texts[i].strip()
    groups, results = Groups(), Results(texts)  # type: ignore[arg-type]
    good = np.flatnonzero(~bad) if slow else np.arange(count)
    groups.add((group_box, COMPACT), good, givens[good] if slow else givens)
    _parse_slow(slow, texts, texts, box, results, groups)
    return texts, results, groups


def _strip(item: object) -> str:
    if isinstance(item, str):
        return item.strip()
    return item.render() if isinstance(item, Puzzle) else repr(item)[:200]


def _parse_all(
    items: Sequence[object], texts: list[str], box: Box | None, results: Results, all_text: bool
) -> Groups:
    """Group every puzzle by (box, notation); record invalid lines in `results`. Lines of length N*N go
    through the compact parser together; those it refuses are parsed one by one, finding the reason."""
    groups = Groups()
    by_length: dict[int, list[int]] = _by_length(texts) if all_text else {}
    slow: list[int] = []
    for i, item in enumerate([] if all_text else items):
        if isinstance(item, Puzzle):
            groups.add((item.box, item.notation), [i], item.givens[None, :])
        elif type(item) is str:
            by_length.setdefault(len(texts[i]), []).append(i)
        else:
            slow.append(i)
    for length, indices in by_length.items():
        group_box = box if box is not None else _inferred_box(length)
        if group_box is None or group_box.cells != length:
            slow.extend(indices)
            continue
        whole = len(indices) == len(texts)  # every line has this length (the usual case): no copies
        givens, ok = parse_compact_batch(texts if whole else [texts[i] for i in indices], group_box)
        if ok.all():
            groups.add((group_box, COMPACT), indices, givens)
            continue
        good = np.flatnonzero(ok)
        groups.add((group_box, COMPACT), [indices[k] for k in good.tolist()], givens[good])
        slow.extend(indices[k] for k in np.flatnonzero(~ok).tolist())
    _parse_slow(sorted(slow), items, texts, box, results, groups)
    return groups


def _parse_slow(
    rows: list[int],
    items: Sequence[object],
    texts: Sequence[str],
    box: Box | None,
    results: Results,
    groups: Groups,
) -> None:
    """Parse the items at `rows` one by one: a puzzle joins its group, anything else is `invalid` with why."""
    for i in rows:
        item = items[i]
        if not isinstance(item, str):
            results.put(
                i, SolveResult(Status.INVALID, texts[i], error=f"not a puzzle text: {type(item).__name__}")
            )
            continue
        try:
            puzzle = parse_puzzle(item, box)
        except PuzzleError as exc:
            results.put(i, SolveResult(Status.INVALID, texts[i], error=str(exc)))
            continue
        groups.add((puzzle.box, puzzle.notation), [i], puzzle.givens[None, :])


def _by_length(texts: list[str]) -> dict[int, list[int]]:
    """Group line positions by text length (vectorised: this runs once per puzzle)."""
    lengths = list(map(len, texts))
    if not lengths or lengths.count(lengths[0]) == len(lengths):
        return {lengths[0]: list(range(len(lengths)))} if lengths else {}
    arr = np.array(lengths, dtype=np.int64)
    return {int(n): np.flatnonzero(arr == n).tolist() for n in np.unique(arr)}


def _inferred_box(cells: int) -> Box | None:
    """The conventional box of a grid of `cells` cells (None when there is none: the slow path says why)."""
    side = math.isqrt(cells)
    return Box.for_side(side) if side * side == cells else None
