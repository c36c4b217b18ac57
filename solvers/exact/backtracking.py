"""`backtracking`: the plain cell-by-cell backtracking of the classic articles (baseline).

Cells are visited in row-major order; at each empty cell the values 1..N that clash with
nothing already in its row, column or box are tried in turn (in a random order when
seeded). There is no propagation and no choice of the most constrained cell, so it is
meant to be slow on hard puzzles: it is the baseline the other exact solvers are measured
against, and a simple, obviously-correct reference for the conformance test.

Row, column and box "used" masks (uint64, bit v-1 for value v) make the clash test one
AND per cell. The search keeps an explicit stack (one entry per empty cell) of the
candidate values still to try, so nothing recurses.

Counters: `nodes` = values placed (tried), `guesses` = branching decisions (empty cells
reached with two or more values that clash with nothing).

The bit helpers come from `solvers.kernel.bits`, shared by every kernel; numba's on-disk cache
only watches a function's own source file, so after editing `bits.py` run `make clean-cache`
(a changed helper would otherwise leave stale compiled kernels behind).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from solvers.exact.base import DONE, LIMIT, KernelSolver, register
from solvers.kernel.bits import (
    GO_ON,
    count_node,
    pick_bit,
    record_puzzle,
    rng_init,
    start_puzzle,
)
from solvers.model.geometry import geometry
from solvers.model.puzzle import Box

_ONE = np.uint64(1)
_ZERO = np.uint64(0)
_ALL = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


@njit(cache=True, nogil=True)
def _bt_kernel(
    n,
    row_of,
    col_of,
    box_of,
    givens,
    limit,
    keep,
    max_nodes,
    time_limit_ns,
    deadline_ns,
    seed,
    stop,
    out_solutions,
    out_counts,
    out_status,
    out_nodes,
    out_guesses,
    out_ns,
):  # type: ignore[no-untyped-def]
    b = givens.shape[0]
    nn = n * n
    full = _ALL >> np.uint64(64 - n)
    rows = np.zeros(n, dtype=np.uint64)
    cols = np.zeros(n, dtype=np.uint64)
    boxes = np.zeros(n, dtype=np.uint64)
    grid = np.zeros(nn, dtype=np.uint8)
    cells = np.zeros(nn, dtype=np.int32)  # the empty cells, row-major: the search order
    cand = np.zeros(nn + 1, dtype=np.uint64)  # values still to try at each depth
    for i in range(b):
        t0, end_ns, status = start_puzzle(deadline_ns, time_limit_ns, stop)
        if status != GO_ON:
            out_status[i] = status
            continue
        rng = rng_init(seed, i)
        rows[:] = 0
        cols[:] = 0
        boxes[:] = 0
        ok = True
        ne = 0
        for cell in range(nn):
            v = np.int64(givens[i, cell])
            grid[cell] = v
            if v == 0:
                cells[ne] = cell
                ne += 1
                continue
            if v > n:
                ok = False
                break
            bit = _ONE << np.uint64(v - 1)
            r, c, x = row_of[cell], col_of[cell], box_of[cell]
            if (rows[r] | cols[c] | boxes[x]) & bit:
                ok = False
                break
            rows[r] |= bit
            cols[c] |= bit
            boxes[x] |= bit
        count = 0
        nodes = 0
        guesses = 0
        status = DONE
        if ok and ne == 0:
            count = 1
            out_solutions[i, 0, :] = grid
            status = LIMIT if limit <= 1 else DONE
        elif ok:
            d = 0
            cell = cells[0]
            cand[0] = full & ~(rows[row_of[cell]] | cols[col_of[cell]] | boxes[box_of[cell]])
            if cand[0] & (cand[0] - _ONE):
                guesses += 1
            while True:
                cell = cells[d]
                r, c, x = row_of[cell], col_of[cell], box_of[cell]
                if grid[cell] != 0:  # undo the value tried last at this depth
                    bit = _ONE << np.uint64(grid[cell] - 1)
                    rows[r] ^= bit
                    cols[c] ^= bit
                    boxes[x] ^= bit
                    grid[cell] = 0
                m = cand[d]
                if m == _ZERO:  # every value tried: back to the previous cell
                    if d == 0:
                        break
                    d -= 1
                    continue
                nodes, halt = count_node(nodes, max_nodes, stop, end_ns)
                if halt != GO_ON:
                    status = halt
                    break
                k, rng = pick_bit(m, seed, rng)
                bit = _ONE << np.uint64(k)
                cand[d] = m ^ bit
                rows[r] |= bit
                cols[c] |= bit
                boxes[x] |= bit
                grid[cell] = k + 1
                if d + 1 == ne:  # every cell filled: a solution
                    if count < keep:
                        out_solutions[i, count, :] = grid
                    count += 1
                    if count >= limit:
                        status = LIMIT
                        break
                    continue  # the next pass undoes this value and tries the next one
                d += 1
                nxt = cells[d]
                cand[d] = full & ~(rows[row_of[nxt]] | cols[col_of[nxt]] | boxes[box_of[nxt]])
                if cand[d] & (cand[d] - _ONE):  # two or more values: a branching decision
                    guesses += 1
                grid[nxt] = 0
        if record_puzzle(
            i, count, status, nodes, guesses, t0, out_counts, out_status, out_nodes, out_guesses, out_ns
        ):
            break


def _tables(box: Box) -> tuple[object, ...]:
    geo = geometry(box)
    return (np.int64(box.n), geo.row_of, geo.col_of, geo.box_of)


BACKTRACKING = register(
    KernelSolver(
        "backtracking",
        _bt_kernel,
        _tables,
        "plain cell-by-cell backtracking in row-major order (baseline: no propagation, no MRV)",
    )
)
