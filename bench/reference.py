"""A plain-Python reference of the `propagation` algorithm, to measure what compiling buys.

Same algorithm as the generic numba kernel of `solvers.exact.propagation`: candidate
masks per cell (Python ints, bit v-1 for value v); naked singles remove a placed value
from the peers; hidden singles place a value that fits one cell of a row, column or box;
a cell without candidates or a value without a place is a contradiction; locked
candidates (pointing and claiming); then depth-first search on the cell with the fewest
candidates. No numba and no numpy in the hot loop: lists and ints only.

    python -m bench.reference [--corpus 9x9/tdoku_puzzles2_17_clue.txt] [--limit 500]

prints puzzles/second for this reference and for the compiled solver on the same sample
(also for its generic cell-mask kernel alone, which 9x9 grids otherwise skip), and the
ratios (CPU time, median of `--repeat` runs).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from functools import lru_cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@lru_cache(maxsize=16)
def _layout(r: int, c: int) -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
    """(units, peers, cell_units) of an R x C box shape, as plain lists."""
    n = r * c
    rows = [[y * n + x for x in range(n)] for y in range(n)]
    cols = [[y * n + x for y in range(n)] for x in range(n)]
    boxes = [
        [(by * r + i) * n + bx * c + j for i in range(r) for j in range(c)]
        for by in range(n // r)
        for bx in range(n // c)
    ]
    units = rows + cols + boxes
    cell_units: list[list[int]] = [[] for _ in range(n * n)]
    for u, cells in enumerate(units):
        for x in cells:
            cell_units[x].append(u)
    peers = [sorted({p for u in cell_units[x] for p in units[u]} - {x}) for x in range(n * n)]
    return units, peers, cell_units


@lru_cache(maxsize=16)
def _segments(r: int, c: int) -> list[tuple[list[int], list[int], list[int]]]:
    """Every box-line intersection: (its cells, the rest of the line, the rest of the box)."""
    n = r * c
    units, _, _ = _layout(r, c)
    out = []
    for b in range(n):
        box = set(units[2 * n + b])
        for line in units[: 2 * n]:
            inter = [x for x in line if x in box]
            if inter and len(inter) < n:
                out.append((inter, [x for x in line if x not in box], [x for x in box if x not in inter]))
    return out


def _propagate(cand: list[int], queue: list[int], r: int, c: int, locked: bool) -> bool:
    """Singles (and locked candidates) to a fixpoint; False on a contradiction."""
    n = r * c
    full = (1 << n) - 1
    units, peers, cell_units = _layout(r, c)
    dirty = set(range(3 * n))
    while True:
        while queue:
            x = queue.pop()
            v = cand[x]
            for p in peers[x]:
                m = cand[p]
                if m & v:
                    m &= ~v
                    cand[p] = m
                    if m == 0:
                        return False
                    if m & (m - 1) == 0:
                        queue.append(p)
                    dirty.update(cell_units[p])
        if dirty:
            u = dirty.pop()
            once = twice = placed = 0
            for x in units[u]:
                m = cand[x]
                twice |= once & m
                once |= m
                if m & (m - 1) == 0:
                    placed |= m
            if once != full:
                return False
            hs = once & ~twice & ~placed
            if hs:
                for x in units[u]:
                    h = cand[x] & hs
                    if h:
                        if h & (h - 1):
                            return False
                        cand[x] = h
                        queue.append(x)
                        dirty.update(cell_units[x])
            continue
        if not locked:
            return True
        changed = False
        for inter, line_rest, box_rest in _segments(r, c):
            inside = 0
            for x in inter:
                inside |= cand[x]
            line_out = box_out = 0
            for x in line_rest:
                line_out |= cand[x]
            for x in box_rest:
                box_out |= cand[x]
            for rest, confined in ((line_rest, inside & ~box_out), (box_rest, inside & ~line_out)):
                if confined:
                    for x in rest:
                        m = cand[x]
                        if m & confined:
                            m &= ~confined
                            cand[x] = m
                            if m == 0:
                                return False
                            if m & (m - 1) == 0:
                                queue.append(x)
                            dirty.update(cell_units[x])
                            changed = True
        if not changed:
            return True


def solve(
    givens: list[int], r: int, c: int, limit: int = 1, locked: bool = True
) -> tuple[list[list[int]], int, int]:
    """Solve one puzzle (a flat list, 0 = empty): -> (solutions up to `limit`, nodes, guesses)."""
    n = r * c
    full = (1 << n) - 1
    cand = [full if v == 0 else 1 << (v - 1) for v in givens]
    queue = [x for x, v in enumerate(givens) if v]
    solutions: list[list[int]] = []
    nodes, guesses = 1, 0
    stack: list[tuple[list[int], int, int]] = []  # snapshot, cell, values left to try
    ok = _propagate(cand, queue, r, c, locked)
    while True:
        if ok:
            best, cell = n + 1, -1
            for x, m in enumerate(cand):
                if m & (m - 1):
                    k = m.bit_count()
                    if k < best:
                        best, cell = k, x
                        if k == 2:
                            break
            if cell < 0:
                solutions.append([m.bit_length() for m in cand])
                if len(solutions) >= limit:
                    break
                ok = False
                continue
            m = cand[cell]
            stack.append((cand[:], cell, m & (m - 1)))
            v = m & -m
            guesses += 1
        else:
            if not stack:
                break
            snap, cell, m = stack[-1]
            cand = snap[:]
            v = m & -m
            if m == v:
                stack.pop()
            else:
                stack[-1] = (snap, cell, m & ~v)
        nodes += 1
        cand[cell] = v
        ok = _propagate(cand, [cell], r, c, locked)
    return solutions, nodes, guesses


def main(argv: list[str] | None = None) -> None:
    import numpy as np

    from bench.solvers import corpora_dir, load_corpus
    from solvers.exact.base import EXACT_SOLVERS, KernelSolver
    from solvers.exact.propagation import generic_kernel, tables

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="9x9/tdoku_puzzles2_17_clue.txt")
    ap.add_argument("--limit", type=int, default=500, help="puzzles in the sample")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    path = corpora_dir() / args.corpus
    if not path.exists():
        print(f"{path} not found: nothing to compare")
        return
    box, givens = load_corpus(path, args.limit)
    rows = [[int(v) for v in g] for g in givens]
    py_times = []
    for _ in range(args.repeat):
        t0 = time.process_time()
        for g in rows:
            sols, _, _ = solve(g, box.rows, box.cols)
            assert sols, "the reference found no solution"
        py_times.append(time.process_time() - t0)
    py_rate = len(rows) / statistics.median(py_times)
    print(f"{args.corpus}: {len(rows)} puzzles, CPU time, median of {args.repeat}")
    print(f"  plain Python reference        : {py_rate:12,.0f} puzzles/s")
    compiled = {"numba `propagation`": EXACT_SOLVERS["propagation"]}
    compiled["its generic kernel"] = KernelSolver("generic", generic_kernel, tables)
    for label, solver in compiled.items():
        solver.solve_batch(givens[:1], box)  # compile or load the kernel first
        nb_times = []
        for _ in range(args.repeat):
            t0 = time.process_time()
            out = solver.solve_batch(givens, box)
            nb_times.append(time.process_time() - t0)
        assert np.all(out.counts == 1)
        rate = len(rows) / statistics.median(nb_times)
        print(f"  {label:30}: {rate:12,.0f} puzzles/s, {rate / py_rate:6,.0f}x the reference")


if __name__ == "__main__":
    main()
