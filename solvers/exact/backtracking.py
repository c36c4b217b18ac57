"""`backtracking`: the plain cell-by-cell backtracking of the classic articles (baseline).

Empty cells in row-major order, each trying the values that clash with nothing in its row, column or
box (random order when seeded); no propagation, no MRV: the slow baseline the other exact solvers are
measured against, and an obviously-correct reference for the conformance test. Row, column and box
masks make the clash test one AND; an explicit stack of values still to try per empty cell.
Counters: `nodes` = values placed, `guesses` = empty cells reached with two or more values.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from solvers.exact.base import KernelSolver, register
from solvers.kernel import bits
from solvers.kernel.bits import ALL, ONE, ZERO
from solvers.kernel.clock import monotonic_ns
from solvers.kernel.outcome import DONE, LIMIT
from solvers.model.geometry import geometry
from solvers.model.puzzle import Box


@njit(cache=True, nogil=True)
def _bt_kernel(n, row_of, col_of, box_of, givens, ask, stop, out):  # type: ignore[no-untyped-def]
    limit, keep, max_nodes, _, _, seed = ask
    out_solutions, _, _, _, _, _ = out
    b = givens.shape[0]
    nn = n * n
    full = ALL >> np.uint64(64 - n)
    rows = np.zeros(n, dtype=np.uint64)
    cols = np.zeros(n, dtype=np.uint64)
    boxes = np.zeros(n, dtype=np.uint64)
    grid = np.zeros(nn, dtype=np.uint8)
    cells = np.zeros(nn, dtype=np.int32)  # the empty cells, row-major: the search order
    cand = np.zeros(nn + 1, dtype=np.uint64)  # values still to try at each depth
    now = monotonic_ns()  # a puzzle's end is the next one's start
    for i in range(b):
        end_ns, status = bits.start_puzzle(i, now, ask, stop, out)
        if status != bits.GO_ON:  # stopped, or out of time before it began (recorded)
            continue
        rng = bits.rng_init(seed, i)
        for a in (rows, cols, boxes):
            a[:] = 0
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
            bit = ONE << np.uint64(v - 1)
            r, c, x = row_of[cell], col_of[cell], box_of[cell]
            if (rows[r] | cols[c] | boxes[x]) & bit:
                ok = False
                break
            rows[r] |= bit
            cols[c] |= bit
            boxes[x] |= bit
        count, nodes, guesses, status = 0, 0, 0, DONE
        if ok and ne == 0:
            count = 1
            out_solutions[i, 0, :] = grid
            status = LIMIT if limit <= 1 else DONE
        elif ok:
            d = 0
            cell = cells[0]
            cand[0] = full & ~(rows[row_of[cell]] | cols[col_of[cell]] | boxes[box_of[cell]])
            if cand[0] & (cand[0] - ONE):
                guesses += 1
            while True:
                cell = cells[d]
                r, c, x = row_of[cell], col_of[cell], box_of[cell]
                if grid[cell] != 0:  # undo the value tried last at this depth
                    bit = ONE << np.uint64(grid[cell] - 1)
                    rows[r] ^= bit
                    cols[c] ^= bit
                    boxes[x] ^= bit
                    grid[cell] = 0
                m = cand[d]
                if m == ZERO:  # every value tried: back to the previous cell
                    if d == 0:
                        break
                    d -= 1
                    continue
                nodes, halt = bits.count_node(nodes, max_nodes, stop, end_ns)
                if halt != bits.GO_ON:
                    status = halt
                    break
                k, rng = bits.pick_bit(m, seed, rng)
                bit = ONE << np.uint64(k)
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
                if cand[d] & (cand[d] - ONE):  # two or more values: a branching decision
                    guesses += 1
                grid[nxt] = 0
        now = bits.record_puzzle(i, count, status, nodes, guesses, now, out)
        if now < 0:
            break


def _tables(box: Box) -> tuple[object, ...]:
    geo = geometry(box)
    return (np.int64(box.n), geo.row_of, geo.col_of, geo.box_of)


register(
    KernelSolver(
        "backtracking",
        _bt_kernel,
        _tables,
        "plain cell-by-cell backtracking in row-major order (baseline: no propagation, no MRV)",
    )
)
