"""`exact_cover`: Knuth's Algorithm X over the 4*N*N Sudoku constraints.

Constraints (columns): cell c filled [0, NN), row r holds v (NN + rN + v), column c holds v
(2NN + cN + v), box b holds v (3NN + bN + v). Candidate row cell*N + v covers four columns and every
column holds N rows, so the matrix is two dense tables per box shape (`row_cols`, `col_rows`). Instead
of dancing links, arrays: `dead[row]` counts the covered columns a row meets, `size[col]` the available
rows of a column; only the header of open columns is a linked list, scanned for the smallest (Knuth's
S heuristic). Givens are pre-selected rows; an explicit stack holds each depth's column and the rows
still to try (a mask). Counters: `nodes` = rows selected, `guesses` = columns with two or more rows.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit

from solvers.exact.base import KernelSolver, register
from solvers.kernel import bits
from solvers.kernel.bits import ONE, ZERO
from solvers.kernel.clock import monotonic_ns
from solvers.kernel.outcome import DONE, LIMIT
from solvers.model.geometry import geometry
from solvers.model.puzzle import Box


@njit(cache=True, nogil=True)
def _cover(col, col_rows, row_cols, dead, size, left, right):  # type: ignore[no-untyped-def]
    right[left[col]] = right[col]
    left[right[col]] = left[col]
    for row in col_rows[col]:
        dead[row] += 1
        if dead[row] == 1:
            for j in range(4):
                size[row_cols[row, j]] -= 1


@njit(cache=True, nogil=True)
def _uncover(col, col_rows, row_cols, dead, size, left, right):  # type: ignore[no-untyped-def]
    rows = col_rows[col]
    for k in range(rows.shape[0] - 1, -1, -1):
        row = rows[k]
        dead[row] -= 1
        if dead[row] == 0:
            for j in range(4):
                size[row_cols[row, j]] += 1
    right[left[col]] = col
    left[right[col]] = col


@njit(cache=True, nogil=True)
def _ec_kernel(n, col_rows, row_cols, givens, ask, stop, out):  # type: ignore[no-untyped-def]
    limit, keep, max_nodes, _, _, seed = ask
    out_solutions, _, _, _, _, _ = out
    b = givens.shape[0]
    nn = n * n
    ncols = 4 * nn
    head = ncols  # the header's root node
    dead = np.zeros(nn * n, dtype=np.int8)  # covered columns met by each candidate row
    size = np.zeros(ncols, dtype=np.int32)  # available rows of each column
    left = np.zeros(ncols + 1, dtype=np.int32)  # the uncovered columns, a circular list
    right = np.zeros(ncols + 1, dtype=np.int32)
    grid = np.zeros(nn, dtype=np.uint8)
    stack_col = np.zeros(nn + 1, dtype=np.int64)  # the column branched on at each depth
    stack_cand = np.zeros(nn + 1, dtype=np.uint64)  # its rows (as k bits) still to try
    stack_row = np.full(nn + 1, -1, dtype=np.int64)  # the row selected at each depth, -1 none
    now = monotonic_ns()  # a puzzle's end is the next one's start
    for i in range(b):
        end_ns, status = bits.start_puzzle(i, now, ask, stop, out)
        if status != bits.GO_ON:  # stopped, or out of time before it began (recorded)
            continue
        rng = bits.rng_init(seed, i)
        dead[:] = 0
        size[:] = n
        for j in range(ncols + 1):
            left[j] = j - 1 if j > 0 else ncols
            right[j] = j + 1 if j < ncols else 0
        ok = True
        for cell in range(nn):  # pre-select the rows of the givens
            v = np.int64(givens[i, cell])
            grid[cell] = v
            if v == 0:
                continue
            row = cell * n + v - 1
            if v > n or dead[row] != 0:  # clashes with an earlier given
                ok = False
                break
            for j in range(4):
                _cover(row_cols[row, j], col_rows, row_cols, dead, size, left, right)
        count, nodes, guesses, status = 0, 0, 0, DONE
        if ok:
            d = 0
            entering = True
            while True:
                if entering:  # a new node: solved, dead, or branch on the smallest column
                    entering = False
                    if right[head] == head:  # every constraint met: a solution
                        if count < keep:
                            out_solutions[i, count, :] = grid
                        count += 1
                        if count >= limit:
                            status = LIMIT
                            break
                        if d == 0:
                            break
                        d -= 1
                        continue
                    best = -1
                    best_size = n + 1
                    j = right[head]
                    while j != head:
                        s = size[j]
                        if s < best_size:
                            best_size = s
                            best = j
                            if s <= 1:
                                break
                        j = right[j]
                    m = ZERO
                    if best_size > 0:
                        for k in range(n):
                            if dead[col_rows[best, k]] == 0:
                                m |= ONE << np.uint64(k)
                    stack_col[d] = best
                    stack_cand[d] = m
                    if m & (m - ONE):  # two or more rows: a branching decision
                        guesses += 1
                    stack_row[d] = -1
                col = stack_col[d]
                row = stack_row[d]
                if row >= 0:  # unselect the row tried last at this depth
                    for j in range(3, -1, -1):
                        _uncover(row_cols[row, j], col_rows, row_cols, dead, size, left, right)
                    grid[row // n] = 0
                    stack_row[d] = -1
                m = stack_cand[d]
                if m == ZERO:  # every row of the column tried: back up
                    if d == 0:
                        break
                    d -= 1
                    continue
                nodes, halt = bits.count_node(nodes, max_nodes, stop, end_ns)
                if halt != bits.GO_ON:
                    status = halt
                    break
                k, rng = bits.pick_bit(m, seed, rng)
                stack_cand[d] = m ^ (ONE << np.uint64(k))
                row = np.int64(col_rows[col, k])
                stack_row[d] = row
                grid[row // n] = row % n + 1
                for j in range(4):
                    _cover(row_cols[row, j], col_rows, row_cols, dead, size, left, right)
                d += 1
                entering = True
        now = bits.record_puzzle(i, count, status, nodes, guesses, now, out)
        if now < 0:
            break


@lru_cache(maxsize=4)
def _tables(box: Box) -> tuple[object, ...]:
    """The exact-cover matrix of a box shape, both ways: `col_rows` (4NN, N) lists the
    candidate rows of each constraint, `row_cols` (N**3, 4) the constraints of each row
    (int32, about 8 MB at 64x64; cached per shape and read-only)."""
    geo = geometry(box)
    n, nn = box.n, box.cells
    cells = np.arange(nn, dtype=np.int64)
    v = np.arange(n, dtype=np.int64)
    row_cols = np.empty((nn, n, 4), dtype=np.int32)
    row_cols[:, :, 0] = cells[:, None]
    row_cols[:, :, 1] = nn + geo.row_of[:, None].astype(np.int64) * n + v
    row_cols[:, :, 2] = 2 * nn + geo.col_of[:, None].astype(np.int64) * n + v
    row_cols[:, :, 3] = 3 * nn + geo.box_of[:, None].astype(np.int64) * n + v
    row_cols = row_cols.reshape(nn * n, 4)
    col_rows = np.empty((4, n, n, n), dtype=np.int32)  # kind, unit (or cell), value, k
    col_rows[0] = (cells.reshape(n, n)[:, :, None] * n + v).reshape(n, n, n)
    for kind in range(3):
        unit_cells = geo.units[kind * n : (kind + 1) * n].astype(np.int64)  # (unit, k)
        col_rows[kind + 1] = unit_cells[:, None, :] * n + v[None, :, None]
    col_rows = col_rows.reshape(4 * nn, n)
    row_cols.setflags(write=False)
    col_rows.setflags(write=False)
    return (np.int64(n), col_rows, row_cols)


register(
    KernelSolver(
        "exact_cover",
        _ec_kernel,
        _tables,
        "Knuth's Algorithm X over the 4*N*N constraints (array links, smallest column first)",
    )
)
