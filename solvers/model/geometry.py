"""Unit and peer tables for a box shape, computed once per shape: every solver indexes cells through them,
so rectangular boxes cost nothing extra.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from solvers.model.puzzle import Box


@dataclass(frozen=True)
class Geometry:
    """Read-only index tables of one box shape (all int32 unless noted)."""

    box: Box
    units: np.ndarray  # (3N, N): cells of rows 0..N-1, then columns, then boxes
    cell_units: np.ndarray  # (N*N, 3): the row, column and box unit of each cell
    peers: np.ndarray  # (N*N, P): the other cells sharing a unit with each cell
    row_of: np.ndarray  # (N*N,)
    col_of: np.ndarray  # (N*N,)
    box_of: np.ndarray  # (N*N,)


@lru_cache(maxsize=64)
def geometry(box: Box) -> Geometry:
    """Return the tables of `box` (cached: shapes are few, tables are reused)."""
    n, r, c = box.n, box.rows, box.cols
    cells = np.arange(n * n, dtype=np.int32)
    row_of = cells // n
    col_of = cells % n
    box_of = (row_of // r) * (n // c) + col_of // c
    units = np.empty((3 * n, n), dtype=np.int32)
    for i in range(n):
        units[i] = np.flatnonzero(row_of == i)
        units[n + i] = np.flatnonzero(col_of == i)
        units[2 * n + i] = np.flatnonzero(box_of == i)
    cell_units = np.stack([row_of, n + col_of, 2 * n + box_of], axis=1).astype(np.int32)
    peer_lists = []
    for cell in range(n * n):
        same = (row_of == row_of[cell]) | (col_of == col_of[cell]) | (box_of == box_of[cell])
        same[cell] = False
        peer_lists.append(np.flatnonzero(same))
    peers = np.array(peer_lists, dtype=np.int32)
    for arr in (units, cell_units, peers, row_of, col_of, box_of):
        arr.setflags(write=False)
    return Geometry(box, units, cell_units, peers, row_of, col_of, box_of.astype(np.int32))
