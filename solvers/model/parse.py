"""Parsing puzzles: one text (`parse_puzzle`: the puzzle, or PuzzleError with the reason) or a batch of
compact lines at once (compiled: the pipeline parses every line twice, far cheaper than solving).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import overload

import numba as nb
import numpy as np

from solvers.kernel.bits import popcount
from solvers.model.geometry import geometry
from solvers.model.puzzle import (
    ALPHABET,
    COMPACT,
    EMPTY_SYMBOLS,
    MAX_SIDE,
    Box,
    Notation,
    NotationKind,
    Puzzle,
    PuzzleError,
    as_box,
)

MAX_LINE_CHARS = 4 * MAX_SIDE * MAX_SIDE * 3  # a 64x64 grid of integers with separators
_SPLIT_RE = re.compile(r"[,;\s]+")
_SYMBOL_VALUE = np.full(256, 255, dtype=np.uint8)  # byte -> value; 255 = unknown symbol
for _i, _ch in enumerate(ALPHABET):
    _SYMBOL_VALUE[ord(_ch)] = _i + 1
for _ch in EMPTY_SYMBOLS:
    _SYMBOL_VALUE[ord(_ch)] = 0


def symbol(value: int, notation: Notation = COMPACT) -> str:
    """Name a value as the user wrote it (a symbol, or an integer)."""
    if notation.kind is NotationKind.COMPACT and 1 <= value <= len(ALPHABET):
        return ALPHABET[value - 1]
    return str(value)


def split_tokens(text: str) -> tuple[list[str], Notation]:
    """Split one line into cell tokens and tell which notation it uses."""
    stripped = text.strip()
    if "," in stripped or ";" in stripped:
        sep = "," if "," in stripped else ";"
        return [t for t in _SPLIT_RE.split(stripped) if t], Notation(NotationKind.INTEGERS, "0", sep)
    parts = stripped.split()
    if len(parts) > 1 and any(len(p) > 1 for p in parts):
        if all(p.lstrip("-").isdigit() for p in parts):
            return parts, Notation(NotationKind.INTEGERS, "0", " ")
        return list("".join(parts)), COMPACT
    chars = list("".join(parts))
    empty = next((ch for ch in chars if ch in EMPTY_SYMBOLS), ".")
    return chars, Notation(NotationKind.COMPACT, empty)


def _values(tokens: list[str], notation: Notation, n: int) -> np.ndarray:
    """Turn tokens into cell values, naming the first token that is not a value of N."""
    out = np.zeros(len(tokens), dtype=np.uint8)
    if notation.kind is NotationKind.INTEGERS:
        for i, tok in enumerate(tokens):
            if tok in EMPTY_SYMBOLS or tok == "-1":
                continue
            if not tok.isdigit():
                raise PuzzleError(f"cell {i + 1}: {tok[:20]!r} is not an integer")
            v = int(tok)
            if v > n:
                raise PuzzleError(f"cell {i + 1}: value {v} is larger than {n}")
            out[i] = v
        return out
    if all(len(tok) == 1 for tok in tokens):
        codes = np.frombuffer("".join(tokens).encode("utf-8", "replace"), dtype=np.uint8)
        if codes.size == len(tokens):
            values = _SYMBOL_VALUE[codes]
            if not (values > n).any():
                return values
    for i, tok in enumerate(tokens):
        v = _SYMBOL_VALUE[ord(tok)] if len(tok) == 1 and ord(tok) < 256 else 255
        if v == 255 or v > n:
            hint = (
                f" (values of a {n}x{n} grid are {ALPHABET[0]}..{ALPHABET[n - 1]})"
                if n <= len(ALPHABET)
                else ""
            )
            raise PuzzleError(f"cell {i + 1}: unknown symbol {tok!r}{hint}")
        out[i] = v
    return out


def infer_box(cells: int, box: Box | None) -> Box:
    """Return the box for a grid of `cells` cells: the given one, or the conventional one of its side
    (square when it can be, else the squarest rectangle: 2x3 for 6x6; `Box.for_side`)."""
    if box is not None:
        if cells != box.cells:
            raise PuzzleError(f"{cells} cells, but a {box} box needs {box.n}x{box.n} = {box.cells}")
        return box
    side = int(round(cells**0.5))
    if side * side != cells or side < 2:
        raise PuzzleError(f"{cells} cells do not make a square grid (16, 36, 64, 81, 100, ... expected)")
    if side > MAX_SIDE:
        raise PuzzleError(f"a {side}x{side} grid is larger than the supported {MAX_SIDE}x{MAX_SIDE}")
    inferred = Box.for_side(side)
    if inferred is None:
        raise PuzzleError(
            f"a {side}x{side} grid has no box of its own ({side} is prime); give one with --box RxC"
        )
    return inferred


PUZZLE_COLUMNS = ("puzzle", "puzzles", "quiz", "quizzes", "sudoku", "sudokus")  # a CSV header's, any case
CSV_HINT = (
    "the line looks like CSV: a first line naming its puzzle column (puzzle, quizzes, ...) or --column NAME "
    "reads the puzzles from that column"
)


def looks_like_csv(text: str) -> bool:
    """Comma-separated fields of which one is longer than any cell value (two digits): a row of a CSV file,
    not a grid written as integers."""
    fields = text.split(",")
    return len(fields) > 1 and any(len(f.strip()) > 2 for f in fields)


def csv_column(header: str, column: str | None = None) -> int | None:
    """The field (from 0) holding the puzzles when `header` is the first line of a CSV file naming their
    column: `column` (any case), else the first field that is one of PUZZLE_COLUMNS; None if it names none."""
    names = [f.strip().strip('"').strip().lower() for f in header.split(",")]
    if column is not None:
        wanted = column.strip().lower()
        return names.index(wanted) if wanted in names else None
    return next((k for k, name in enumerate(names) if name in PUZZLE_COLUMNS), None)


def find_clash(givens: np.ndarray, box: Box, notation: Notation = COMPACT) -> str | None:
    """Return `row 3 has two 5s` for the first unit holding a given twice, else None."""
    geo = geometry(box)
    n = box.n
    kinds = ("row", "column", "box")
    for u, cells in enumerate(geo.units):
        vals = givens[cells]
        vals = vals[vals > 0]
        if len(vals) != len(np.unique(vals)):
            counts = np.bincount(vals, minlength=n + 1)
            v = int(np.flatnonzero(counts > 1)[0])
            times = {2: "two", 3: "three", 4: "four"}.get(int(counts[v]), str(int(counts[v])))
            return f"{kinds[u // n]} {u % n + 1} has {times} {symbol(v, notation)}s"
    return None


def parse_puzzle(text: str, box: Box | str | None = None) -> Puzzle:
    """Parse one puzzle (one line, or one row per line); raise PuzzleError with the reason."""
    box = as_box(box)
    if len(text) > MAX_LINE_CHARS:
        raise PuzzleError(too_long(len(text)))
    if "\x00" in text:
        raise PuzzleError("the text holds a NUL byte")
    rows = [ln for ln in text.splitlines() if ln.strip()]
    tokens: list[str] = []
    notation = COMPACT
    for ln in rows or [""]:
        row_tokens, notation = split_tokens(ln)
        tokens.extend(row_tokens)
    if not tokens:
        raise PuzzleError("the puzzle is empty")
    inferred = box is None
    try:
        box = infer_box(len(tokens), box)
    except PuzzleError as exc:
        if not looks_like_csv(text):
            raise
        raise PuzzleError(f"{exc}; {CSV_HINT}") from None
    try:
        givens = _values(tokens, notation, box.n)
    except PuzzleError as exc:
        row_box = Box.for_side(len(tokens)) if inferred and len(rows) <= 1 else None
        if row_box is None:
            raise
        side = len(tokens)
        raise PuzzleError(
            f"{exc}; if the line is one row of a {side}x{side} grid, give --box {row_box}"
        ) from None
    if clash_mask(givens[None, :], box)[0]:  # compiled check first; the reason only on a clash
        raise PuzzleError(find_clash(givens, box, notation) or "two equal givens share a unit")
    return Puzzle(box, givens, notation)


def parse_compact_batch(lines: list[str], box: Box) -> tuple[np.ndarray, np.ndarray]:
    """Parse equal-length compact lines at once: -> (givens uint8[B, N*N], ok bool[B]); a row not `ok` (a bad
    symbol, a wrong length or a clash) is re-parsed by `parse_puzzle` for the reason. Compiled: one pass
    over the bytes, so parsing stays cheap beside solving."""
    nn = box.cells
    b = len(lines)
    lengths = list(map(len, lines))
    whole = lengths.count(nn) == b
    ok = np.ones(b, dtype=bool) if whole else np.array([n == nn for n in lengths], dtype=bool)
    givens = np.zeros((b, nn), dtype=np.uint8)
    if not ok.any():
        return givens, ok
    kept = lines if whole else [s for s, g in zip(lines, ok, strict=True) if g]
    joined = "".join(kept).encode("ascii", "replace")  # a character beyond ASCII becomes "?", no symbol
    raw = np.frombuffer(joined, dtype=np.uint8).reshape(-1, nn)
    out = givens if whole else np.zeros((raw.shape[0], nn), dtype=np.uint8)
    good = np.zeros(raw.shape[0], dtype=np.bool_)
    _read_rows(raw, _SYMBOL_VALUE, box.n, geometry(box).cell_units, out, good)
    if whole:
        return givens, good
    givens[ok] = out
    ok[ok] = good
    return givens, ok


@nb.njit(cache=True, nogil=True)
def _read_rows(
    raw: np.ndarray, table: np.ndarray, n: int, cell_units: np.ndarray, givens: np.ndarray, ok: np.ndarray
) -> None:
    """Map symbol bytes to values; ok[b] when every symbol is known, <= n, and no unit repeats a given.
    Branch-free (a unit repeats a given iff its mask has fewer bits than it has givens): empty cells
    are random in a puzzle, so branches mispredict."""
    units = 3 * n
    seen = np.zeros(units, dtype=np.uint64)
    count = np.zeros(units, dtype=np.int64)
    one = np.uint64(1)
    for b in range(raw.shape[0]):
        seen[:] = 0
        count[:] = 0
        top = 0
        for cell in range(raw.shape[1]):
            v = table[raw[b, cell]]
            givens[b, cell] = v
            top = max(top, v)
            given = 1 if v else 0
            bit = (one << np.uint64(min(max(v, 1), 64) - 1)) * np.uint64(given)  # 0 for an empty cell
            for k in range(3):
                u = cell_units[cell, k]
                seen[u] |= bit
                count[u] += given
        good = top <= n
        for u in range(units):
            if not good:
                break
            good = popcount(seen[u]) == count[u]
        if not good:
            givens[b, :] = 0
        ok[b] = good


def read_framed(text: str, rows: int, cells: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Read `rows` compact puzzles of `cells` symbols, one per line of `text`: -> (givens uint8[rows, cells],
    bad bool[rows]: a byte that is no symbol of side `n`, the lines' bytes as a view), or None when `text`
    is not so framed (a line of another length, a character beyond ASCII). Clashes are not looked for:
    a kernel returns no verified grid for them, so `solvers.api` checks only the rows it did not solve."""
    if rows <= 0 or len(text) != rows * (cells + 1) - 1:
        return None
    try:
        data = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    except UnicodeEncodeError:
        return None
    givens = np.empty((rows, cells), dtype=np.uint8)
    bad = np.empty(rows, dtype=np.bool_)
    if not _read_framed(data, rows, cells, _SYMBOL_VALUE, n, givens, bad):
        return None
    lines = np.lib.stride_tricks.as_strided(data, (rows, cells), (cells + 1, 1), writeable=False)
    return givens, bad, lines


@nb.njit(cache=True, nogil=True)
def _read_framed(
    data: np.ndarray, rows: int, cells: int, table: np.ndarray, n: int, givens: np.ndarray, bad: np.ndarray
) -> bool:
    """Map each row's symbol bytes to values (`table`: 255 for no symbol); False when the lines are not one
    puzzle each (a separator that is no newline, a newline inside a row)."""
    stride = cells + 1
    framed = True
    for r in range(rows):
        base = r * stride
        for k in range(cells):
            givens[r, k] = table[data[base + k]]
        top = np.uint8(0)
        for k in range(cells):
            top = max(top, givens[r, k])
        bad[r] = top > n
        if top == 255:  # a newline in the row is framing gone wrong, not a bad symbol
            for k in range(cells):
                framed &= data[base + k] != 10
        if r + 1 < rows:
            framed &= data[base + cells] == 10
    return framed


class Lines(Sequence[str]):
    """Puzzle texts held as one string, joined by newlines (a pipeline chunk's form): `solve_many` reads
    it at once (`read_framed`), and a line becomes a str only when it is read."""

    __slots__ = ("text", "count", "_lines", "symbols")

    def __init__(self, text: str, count: int) -> None:
        self.text = text
        self.count = count
        self._lines: list[str] | None = None
        self.symbols: np.ndarray | None = None  # the lines as a block of bytes u8[count, cells], once framed

    def __len__(self) -> int:
        return self.count

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if self._lines is None:
            self._lines = self.text.split("\n") if self.count else []
            if len(self._lines) != self.count:
                raise ValueError(f"{len(self._lines)} lines for {self.count} puzzles")
        return self._lines[i]


def clash_mask(givens: np.ndarray, box: Box) -> np.ndarray:
    """Return bool[B]: True where some unit holds a given twice (compiled: far cheaper than solving)."""
    out = np.zeros(givens.shape[0], dtype=np.bool_)
    if givens.shape[0]:
        g = geometry(box)
        _clash_rows(np.ascontiguousarray(givens, dtype=np.uint8), g.cell_units, box.n, out)
    return out


@nb.njit(cache=True, nogil=True)
def _clash_rows(givens: np.ndarray, cell_units: np.ndarray, n: int, out: np.ndarray) -> None:
    """Set out[b] when a unit of givens[b] repeats a value: one pass over the cells, a uint64 mask a unit."""
    seen = np.zeros(3 * n, dtype=np.uint64)
    one = np.uint64(1)
    for b in range(givens.shape[0]):
        seen[:] = 0
        for cell in range(givens.shape[1]):
            v = givens[b, cell]
            if v == 0:
                continue
            bit = one << np.uint64(v - 1)
            ur, uc, ub = cell_units[cell, 0], cell_units[cell, 1], cell_units[cell, 2]
            if (seen[ur] | seen[uc] | seen[ub]) & bit:
                out[b] = True
                break
            seen[ur] |= bit
            seen[uc] |= bit
            seen[ub] |= bit


CR_INSIDE = (
    "the line holds a carriage return, which ends no line (a newline or CRLF does): a file with CR-only "
    "line ends? convert it, e.g. tr '\\r' '\\n' < IN > OUT"
)


def too_long(length: int, head: str = "") -> str:
    """The reason a line of `length` characters is refused (`head`: its first characters; a carriage return
    among the first 200 says why it is so long: CR-only line ends, the whole file one line)."""
    reason = f"{length:,} characters is longer than the {MAX_LINE_CHARS:,} allowed"
    return f"{reason}; {CR_INSIDE}" if "\r" in head[:200] else reason


def row_side(tokens: int, box: Box | None) -> int | None:
    """Return N when a line of `tokens` cells is one row of an N x N grid, else None. Without a box, when N
    has a square box and the line is no whole smaller grid (16, 36 and 64 cells are whole 4x4, 6x6, 8x8
    grids: such sides written a row per line need --box), so a stray line cannot swallow the next ones."""
    if box is not None:
        return box.n if tokens == box.n and tokens != box.cells else None
    side = math.isqrt(tokens)
    whole = side * side == tokens and Box.for_side(side) is not None
    return tokens if Box.square(tokens) is not None and not whole else None
