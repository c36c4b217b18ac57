"""`propagation` (the default exact solver): constraint propagation plus depth-first search.

One generic kernel handles every box shape with N = R*C up to 64; 9x9 grids with 3x3 boxes go to the
band kernel of `propagation9`, 16x16 grids with 4x4 boxes first to that of `propagation16` (same contract,
much faster there). Generic kernel: per node, the rules of `propagation_rules` to a fixpoint, then binary
branching (a decision `cell = value`, on failure its refutation first) on the last failed decision's cell
while open (last conflict), else by conflict-weighted MRV (dom/wdeg: fewest candidates per weight of the
cell's units, or a value with two or three places in a unit when that scores better; each contradiction
adds 1 to the blamed unit's weight); an explicit stack of candidate snapshots, one per decision.
`seed` != 0 randomises ties and values (a per-puzzle xorshift64 stream). With `limit` 1 the search restarts
after 512 x Luby(k) nodes in run k, keeping the weights, later runs random (seed 0: a stream from the
givens, so it stays deterministic and "no solution" a proof); with `limit` > 1 no restarts.
Counters: `nodes` = states propagated (root, decisions, refutations), `guesses` = decisions.
numba stamps a cache with its function's own file only: `tie_caches` below ties these kernels to all of them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from solvers.exact import propagation9, propagation16, propagation_rules
from solvers.exact.base import KernelSolver, register
from solvers.exact.propagation9 import kernel9
from solvers.exact.propagation_rules import JIT, luby, propagate
from solvers.kernel import band, bits
from solvers.kernel.bits import ALL, ONE, ZERO, copy_items, ctz, popcount, rng_init, rng_next, tie_caches
from solvers.kernel.clock import monotonic_ns
from solvers.kernel.outcome import BUDGET, DONE, LIMIT, STOPPED, TIMEOUT
from solvers.model.geometry import geometry
from solvers.model.puzzle import Box

_DUAL_UP_TO = 3  # branch on a value of a unit when it has at most this many places
RESTART_UNIT = 512  # nodes of a run between restarts (limit 1), times the Luby sequence


@njit(**JIT)
def _kernel_generic(r, c, units, cell_units, peers, givens, ask, stop, out, carry, masks, ints):  # type: ignore[no-untyped-def]
    """The generic kernel: the common exact signature after (r, c, units, cell_units, peers),
    then `carry` (int64[0], or int64[3 + 3N] for a batch of one: see `new_carry`), then the
    working arrays of `workspace`."""
    limit, keep, max_nodes, _, _, seed = ask
    out_solutions, _, _, _, _, _ = out
    n = r * c
    nn = n * n
    check = 255 if nn <= 256 else (63 if nn <= 1296 else 15)  # nodes between clock looks (mask)
    cand, root, du, elim, seg, wv, stk_cand, stk_val = masks  # see `workspace`
    queue, ecell, wi, weight, stk_cell = ints
    now = monotonic_ns()  # a puzzle's end is the next one's start
    for i in range(givens.shape[0]):
        end_ns, status = bits.start_puzzle(i, now, ask, stop, out)
        if status != bits.GO_ON:  # stopped, or out of time before it began (recorded)
            continue
        if seed != 0:
            rng = rng_init(seed, i)
        else:  # restarts after the first run draw from a stream fixed by the puzzle itself
            h = np.uint64(0xCBF2_9CE4_8422_2325)
            for x in range(nn):
                h = (h ^ np.uint64(givens[i, x])) * np.uint64(0x100_0000_01B3)
            rng = rng_init(np.int64(h >> np.uint64(1)), np.int64(0))  # typed: a literal 0 compiles twice
        for u in range(3 * n):
            weight[u] = 1
        count, nodes, guesses, depth, status = 0, 1, 0, 0, DONE
        ok = (
            propagate_root(
                r, c, units, cell_units, peers, givens[i], cand, queue, du, seg, elim, ecell, wi, wv
            )
            < 0
        )
        copy_items(root, 0, cand, 0, nn)
        shuffle = seed != 0  # random ties and alternatives
        run_start, runs = 1, 1
        resume = carry.shape[0] > 0  # one Luby run per call, the weights carried between calls
        if resume and carry[0] > 0:
            runs, rng, shuffle = carry[0] + 1, np.uint64(carry[1]), True
            for u in range(3 * n):
                weight[u] = carry[3 + u]
        cutoff = RESTART_UNIT * luby(runs)
        last = -1  # the cell of the last failed decision, branched on again while open (last conflict)
        while True:
            if resume and nodes - run_start >= cutoff:  # this call's run is over
                status = BUDGET
                break
            if limit == 1 and depth > 0 and nodes - run_start >= cutoff:  # restart, keeping the weights
                copy_items(cand, 0, root, 0, nn)
                ok, depth, run_start, runs, shuffle, last = True, 0, nodes, runs + 1, True, -1
                cutoff = RESTART_UNIT * luby(runs)
            if ok:
                cell, unit, val = -1, -1, ZERO
                if last >= 0 and cand[last] & (cand[last] - ONE):
                    cell = last  # last conflict: the culprit again, until it holds
                else:
                    last = -1
                    best, bw, ties = 65, 1, 0  # the cell with the fewest candidates per weight of its units
                    for x in range(nn):
                        m = cand[x]
                        if m & (m - ONE):
                            pc = popcount(m)
                            w = weight[cell_units[x, 0]] + weight[cell_units[x, 1]] + weight[cell_units[x, 2]]
                            if pc * bw < best * w:
                                best, bw, cell, ties = pc, w, x, 1
                            elif pc * bw == best * w and shuffle:
                                ties += 1
                                rng = rng_next(rng)
                                if rng % np.uint64(ties) == ZERO:
                                    cell = x
                    dual = cell >= 0 and (best > 2 or bw > 3)
                    for u in range(3 * n if dual else 0):  # ... or a value of a unit
                        g1, g2, g3, g4 = ZERO, ZERO, ZERO, ZERO
                        for k in range(n):
                            m = cand[units[u, k]]
                            g4 |= g3 & m
                            g3 |= g2 & m
                            g2 |= g1 & m
                            g1 |= m
                        w = 3 * weight[u]
                        for pc in range(2, _DUAL_UP_TO + 1):
                            few = (g2 & ~g3) if pc == 2 else (g3 & ~g4)  # values with pc places
                            if few == ZERO:
                                continue
                            if pc * bw < best * w:
                                best, bw, unit, val, ties = pc, w, u, few & (~few + ONE), 1
                            elif pc * bw == best * w and shuffle:
                                ties += 1
                                rng = rng_next(rng)
                                if rng % np.uint64(ties) == ZERO:
                                    unit, val = u, few & (~few + ONE)
                            break
                if cell < 0:  # every cell holds one value: a solution
                    if count < keep:
                        for x in range(nn):
                            out_solutions[i, count, x] = ctz(cand[x]) + 1
                    count += 1
                    if count >= limit:
                        status = LIMIT
                        break
                    ok = False
                    continue
                if max_nodes > 0 and nodes >= max_nodes:
                    status = BUDGET
                    break
                m = cand[cell]  # the values of the cell, or the places of the unit's value
                if unit >= 0:
                    m = ZERO
                    for k in range(n):
                        if cand[units[unit, k]] & val:
                            m |= ONE << np.uint64(k)
                v, rng = bits.pick_value(m, shuffle, rng)
                if unit >= 0:
                    cell, v = units[unit, ctz(v)], val
                copy_items(stk_cand, depth * nn, cand, 0, nn)
                stk_cell[depth], stk_val[depth] = cell, v
                depth += 1
                guesses += 1
                du[8] = cand[cell] & ~v  # decide: cell = v
                cand[cell] = v
                decided = True
            else:  # refute the deepest decision: back to its state, without its value
                if depth == 0:
                    break
                if max_nodes > 0 and nodes >= max_nodes:
                    status = BUDGET
                    break
                depth -= 1
                copy_items(cand, 0, stk_cand, depth * nn, nn)
                cell, v = stk_cell[depth], stk_val[depth]
                cand[cell] &= ~v
                du[8] = v
                decided = False
            nodes += 1
            halt = bits.interrupted(stop, end_ns) if (nodes & check) == 0 else bits.GO_ON
            if halt != bits.GO_ON:
                status = halt
                break
            m = cand[cell]
            if m == ZERO:  # cannot happen (a decision's cell has two values or more): kept safe
                ok = False
                continue
            qt = np.int64(0)
            if (m & (m - ONE)) == ZERO:
                queue[0] = cell
                qt = np.int64(1)
            du[0] = du[3] = ONE << np.uint64(cell_units[cell, 0])
            du[1] = du[4] = ONE << np.uint64(cell_units[cell, 1] - n)
            du[2] = du[5] = ONE << np.uint64(cell_units[cell, 2] - 2 * n)
            du[6], du[7] = du[0], du[1]
            blame = propagate(r, c, units, cell_units, peers, cand, queue, qt, du, seg, elim, ecell, wi, wv)
            ok = blame < 0
            if not ok:
                weight[blame] += 1
                if decided:
                    last = cell
        if resume:
            carry[0], carry[1], carry[2] = runs, np.int64(rng), carry[2] + nodes
            for u in range(3 * n):
                carry[3 + u] = weight[u]
        now = bits.record_puzzle(i, count, status, nodes, guesses, now, out)
        if now < 0:
            break


@njit(**JIT)
def propagate_root(r, c, units, cell_units, peers, givens, cand, queue, du, seg, elim, ecell, wi, wv):  # type: ignore[no-untyped-def]
    """Propagate the givens (uint8[NN]) to the root fixpoint, writing each cell's candidates
    into `cand` (the other arrays: `workspace`'s); return -1 at a fixpoint, else the unit
    blamed for a contradiction."""
    n = r * c
    full = ALL >> np.uint64(64 - n)
    qt = 0
    for x in range(n * n):
        v = np.int64(givens[x])
        cand[x] = full if v == 0 else (ONE << np.uint64(v - 1) if v <= n else ZERO)
        if v != 0:
            queue[qt] = x
            qt += 1
    for k in range(9):  # every unit once: also finds a value with no place
        du[k] = full
    qt = np.int64(qt)  # typed: an untyped 0 reaches `propagate` as a literal and compiles a second copy
    return propagate(r, c, units, cell_units, peers, cand, queue, qt, du, seg, elim, ecell, wi, wv)


def root_candidates(box: Box, givens: np.ndarray) -> np.ndarray | None:
    """Each cell's candidates (uint64[N*N], bit v-1 for value v) after the generic kernel's root
    propagation, or None when it proves there is no solution. Sound: a removed candidate is in no solution."""
    r, c, units, cell_units, peers = tables(box)
    cand = np.empty(box.cells, dtype=np.uint64)
    (_, _, du, elim, seg, wv, _, _), (queue, ecell, wi, _, _) = workspace(box.n)
    givens = np.ascontiguousarray(givens, np.uint8)
    blamed = propagate_root(r, c, units, cell_units, peers, givens, cand, queue, du, seg, elim, ecell, wi, wv)
    return None if blamed >= 0 else cand


_RULES = [getattr(propagation_rules, f) for f in ("_locked_lines", "_gac", "_alldiff", "_fish")]
_COMPILED = [_kernel_generic, propagate_root, propagate, luby, kernel9, propagation16.kernel16, *_RULES]
tie_caches(_COMPILED, [propagation9, propagation16, propagation_rules, bits, band])


def tables(box: Box) -> tuple[object, ...]:
    """The kernel's tables: the box sides, then the units, cell units and peers of `geometry`."""
    geo = geometry(box)
    return (np.int64(box.rows), np.int64(box.cols), geo.units, geo.cell_units, geo.peers)


_NO_CARRY = np.zeros(0, dtype=np.int64)


def kernel(r, c, units, cell_units, peers, *args, carry=None):  # type: ignore[no-untyped-def]
    """The propagation kernel (common signature after `tables(box)`): 9x9 to the band kernel, 16x16 to
    theirs first (`kernel16_first`), every other shape and any call with a `carry` to the generic one."""
    if r == 3 and c == 3:
        kernel9(*args)
    elif r == 4 and c == 4 and carry is None:
        kernel16_first(r, c, units, cell_units, peers, *args)
    else:
        generic_kernel(r, c, units, cell_units, peers, *args, carry=carry)


_PERM16 = propagation16.build_perm16()
_NCONF16 = propagation16.build_nconf16()
HANDOFF_NODES = 1000  # nodes of the 16x16 band kernel before the generic kernel takes a puzzle over


def kernel16_first(r, c, units, cell_units, peers, givens, ask, stop, out):  # type: ignore[no-untyped-def]
    """16x16: the band kernel on every puzzle for HANDOFF_NODES nodes, then the generic kernel (restarts,
    conflict weights: hard puzzles) from scratch on those left open; counters, budget and time add up."""
    limit, keep, max_nodes, time_limit_ns, deadline_ns, seed = ask
    sols, _, status, nodes, guesses, ns = out
    first = HANDOFF_NODES if max_nodes == 0 else min(max_nodes, HANDOFF_NODES)
    propagation16.kernel16(_PERM16, _NCONF16, givens, (limit, keep, np.int64(first), *ask[3:]), stop, out)
    if first == max_nodes:  # the caller's budget, not the hand-off's
        return
    for i in np.flatnonzero(status == BUDGET):
        if stop[0] != 0:
            status[i] = STOPPED
            continue
        tl = np.int64(0)
        if time_limit_ns > 0:
            tl = np.int64(time_limit_ns - ns[i])
            if tl <= 0:
                status[i] = TIMEOUT
                continue
        budget = np.int64(0 if max_nodes == 0 else max(1, max_nodes - nodes[i]))
        spent_nodes, spent_guesses, spent_ns = nodes[i], guesses[i], ns[i]
        sols[i] = 0  # the generic kernel counts from scratch
        rest = tuple(a[i : i + 1] for a in out)
        ask_rest = (limit, keep, budget, tl, deadline_ns, seed)
        generic_kernel(r, c, units, cell_units, peers, givens[i : i + 1], ask_rest, stop, rest)
        nodes[i] += spent_nodes
        guesses[i] += spent_guesses
        ns[i] += spent_ns


def generic_kernel(r, c, units, cell_units, peers, *args, carry=None):  # type: ignore[no-untyped-def]
    """The generic kernel for any shape, 9x9 included (compared with the band kernel), optionally resumed."""
    carry = _NO_CARRY if carry is None else carry
    _kernel_generic(r, c, units, cell_units, peers, *args, carry, *workspace(int(r) * int(c)))


def workspace(n: int) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """The generic kernel's working arrays for side n: (masks, ints), allocated here, not in the kernel
    (docs/decisions.md). A snapshot level per cell, as deep as a search goes; untouched pages cost nothing."""
    nn = n * n
    masks = (
        np.empty(nn, np.uint64),  # cand: the candidates of each cell (bit v-1 for value v)
        np.empty(nn, np.uint64),  # root: the propagated root, for restarts
        np.empty(9, np.uint64),  # du: units and values to look at (see `propagate`)
        np.zeros(nn, np.uint64),  # elim: values to remove per cell, zero between rules
        np.empty((n, n + 2), np.uint64),  # seg: locked candidates' segments
        np.empty((4, 64), np.uint64),  # wv: matching work of `_gac`
        np.empty((nn + 1, nn), np.uint64),  # stk_cand: a snapshot per decision
        np.empty(nn + 1, np.uint64),  # stk_val: the value of each decision
    )
    ints = (
        np.empty(nn, np.int32),  # queue: cells fixed, to remove from their peers
        np.empty(nn, np.int32),  # ecell: cells with eliminations recorded
        np.empty((4, 64), np.int64),  # wi: matching work of `_gac`
        np.empty(3 * n, np.int64),  # weight: contradictions blamed on each unit, plus 1
        np.empty(nn + 1, np.int64),  # stk_cell: the cell of each decision
    )
    return masks, ints


def resumable(box: Box) -> bool:
    """Whether the kernel takes a carry for this box: every shape but 3x3 (the band kernel). With one, a
    call runs the next Luby run of one puzzle: a race's search goes on, not repeated (docs/decisions.md)."""
    return not (box.rows == 3 and box.cols == 3)


register(
    KernelSolver(
        "propagation",
        kernel,
        tables,
        "singles, locked candidates (and all-different consistency and fish from 25x25) + conflict-weighted "
        "MRV depth-first search; for 9x9 a bitboard kernel with triads, branching on band configurations; "
        "for 16x16 a bitboard kernel first",
        resumable=resumable,
    )
)
