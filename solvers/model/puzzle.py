"""The puzzle model: box shape, givens, and the notation a puzzle was written in. A grid is a flat uint8
array of N*N cell values, row-major, 0 for empty: one plain type the kernels, the verifier and the
formatter all take without conversion.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

# Values 1..9, then A..Z, then a..z (the corpora's alphabet extended to 61 symbols).
ALPHABET = "123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
EMPTY_SYMBOLS = ".0_-"
MAX_SIDE = 64
MAX_COMPACT_SIDE = len(ALPHABET)  # larger grids can only be written as integers

_BOX_RE = re.compile(r"^\s*(\d+)\s*[xX*]\s*(\d+)\s*$")


class PuzzleError(ValueError):
    """A puzzle text that cannot be a puzzle; the message is the reason, for a user."""


@dataclass(frozen=True, slots=True)
class Box:
    """The shape of one box: `rows` x `cols` cells; the grid side is rows*cols."""

    rows: int
    cols: int

    def __post_init__(self) -> None:
        if self.rows < 1 or self.cols < 1:
            raise PuzzleError(f"box {self.rows}x{self.cols}: both sides must be at least 1")
        if not 2 <= self.n <= MAX_SIDE:
            raise PuzzleError(
                f"box {self.rows}x{self.cols} makes a {self.n}x{self.n} grid; "
                f"sides from 2 to {MAX_SIDE} are supported"
            )

    @property
    def n(self) -> int:
        """Return the grid side N (also the number of values)."""
        return self.rows * self.cols

    @property
    def cells(self) -> int:
        """Return the number of cells N*N."""
        return self.n * self.n

    def __str__(self) -> str:
        return f"{self.rows}x{self.cols}"

    @classmethod
    def parse(cls, text: str) -> Box:
        """Read a box shape written `RxC` (rows x columns of one box)."""
        m = _BOX_RE.match(text)
        if not m:
            raise PuzzleError(f"box {text!r}: write it as RxC, e.g. 3x3 or 2x3")
        return cls(int(m.group(1)), int(m.group(2)))

    @classmethod
    def square(cls, n: int) -> Box | None:
        """Return the square box of side sqrt(n), or None when n is not a perfect square."""
        r = math.isqrt(n)
        return cls(r, r) if r * r == n and 2 <= n <= MAX_SIDE else None

    @classmethod
    def for_side(cls, n: int) -> Box | None:
        """Return the conventional box of an N x N grid: square when N is a perfect square, else the
        squarest rectangle with fewer rows than columns (6 -> 2x3, 12 -> 3x4, 30 -> 5x6); None
        when N is prime (no box but a whole row) or outside 4..MAX_SIDE."""
        if not 4 <= n <= MAX_SIDE:
            return None
        rows = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)
        return cls(rows, n // rows) if rows > 1 else None


def as_box(box: Box | str | None) -> Box | None:
    """Accept a Box, an `RxC` string or None."""
    if box is None or isinstance(box, Box):
        return box
    return Box.parse(box)


class NotationKind(StrEnum):
    """How a puzzle was written, so that its solution is written the same way."""

    COMPACT = "compact"  # one symbol per cell
    INTEGERS = "integers"  # separated integers, 0 = empty


@dataclass(frozen=True, slots=True)
class Notation:
    """The notation of an input: compact with its empty symbol, or integers with a separator."""

    kind: NotationKind = NotationKind.COMPACT
    empty: str = "."
    separator: str = ","

    def render(self, grid: np.ndarray, box: Box) -> str:
        """Write a grid (0 = empty) in this notation on one line."""
        if self.kind is NotationKind.COMPACT and box.n <= MAX_COMPACT_SIDE:
            return _compact_table(self.empty)[np.asarray(grid, dtype=np.uint8)].tobytes().decode("ascii")
        return self.separator.join(str(int(v)) for v in grid)


@functools.cache
def _compact_table(empty: str) -> np.ndarray:
    return np.frombuffer((empty + ALPHABET).encode("ascii"), dtype=np.uint8)


COMPACT = Notation()


@dataclass(frozen=True, slots=True)
class Puzzle:
    """A box shape and its givens (uint8[N*N], 0 = empty), with the notation it came in."""

    box: Box
    givens: np.ndarray
    notation: Notation = field(default=COMPACT)

    @property
    def n(self) -> int:
        """Return the grid side N."""
        return self.box.n

    def render(self, grid: np.ndarray | None = None) -> str:
        """Write `grid` (default: the givens) in the puzzle's own notation."""
        return self.notation.render(self.givens if grid is None else grid, self.box)

    def __str__(self) -> str:
        return self.render()
