"""The search both band kernels share (`solvers.exact.propagation9`, `propagation16`), one copy.

Word sd*d + sb*b holds the cells of band b (a row of boxes) where digit d is still possible, row after
row. Everything here is inlined into each kernel with its hooks: the sizes, constants at the call, unroll
the loops, and no call passes arrays (each would cost reference counts, more than the work).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from solvers.kernel import bits
from solvers.kernel.bits import ALL, ONE, ZERO, ctz, popcount
from solvers.kernel.clock import monotonic_ns
from solvers.kernel.outcome import BUDGET, DONE, LIMIT


@njit(cache=True, nogil=True, inline="always")
def band_columns_out(f, cols, d, b, nbands, sd, sb, todo, dd):  # type: ignore[no-untyped-def]
    """Clear the columns `cols` (placed cells of digit d in band b) from d's other bands: -> (todo, dd)
    with the words changed flagged, and d."""
    for k in range(1, nbands):
        j = sd * d + sb * ((b + k) % nbands)
        x = f[j]
        f[j] = x & ~cols
        ch = np.uint64((x & cols) != ZERO)
        todo |= ch << np.uint64(j)
        dd |= ch << np.uint64(d)
    return todo, dd


@njit(cache=True, nogil=True, inline="always")
def band_singles(f, u, pairs, nbands, ndigits, sd, sb, row_peers, todo, dd):  # type: ignore[no-untyped-def]
    """Naked singles and empty cells by bit-sliced counting of each band's words (`u` the open cells); a
    single leaves the rest of its row (`row_peers(bit)`), its word flagged in `todo` and its digit in `dd`;
    `pairs[b]` gets band b's open cells with two candidates. -> (ok: no empty cell, found: a single, todo,
    dd)."""
    found = False
    for b in range(nbands):
        ub = u[b]
        one, two, three = ZERO, ZERO, ZERO
        for d in range(ndigits):
            x = f[sd * d + sb * b]
            three |= two & x
            two |= one & x
            one |= x
        if ub & ~one:
            return False, found, todo, dd
        ns = ub & one & ~two
        pairs[b] = ub & two & ~three
        if ns == ZERO:
            continue
        found = True
        for d in range(ndigits):
            j = sd * d + sb * b
            x = f[j] & ns
            if x:
                todo |= ONE << np.uint64(j)
                dd |= ONE << np.uint64(d)
            while x:
                lb = x & (~x + ONE)
                x ^= lb
                f[j] &= ~row_peers(lb)
    return True, found, todo, dd


@njit(cache=True, nogil=True, inline="always")
def band_grid(f, grid, nbands, ndigits, sd, sb):  # type: ignore[no-untyped-def]
    """Write a solved band kernel's grid (each word holds one cell per row of its band: loops of fixed
    length)."""
    top = ONE << np.uint64(nbands * ndigits - 1)  # keeps ctz inside a band whatever the word
    for b in range(nbands):
        for d in range(ndigits):
            x = f[sd * d + sb * b]
            for _ in range(nbands):
                grid[nbands * ndigits * b + ctz(x | top)] = d + 1
                x &= x - ONE


@njit(cache=True, nogil=True, inline="always")
def cell_branch(f, u, pairs, nbands, ndigits, sd, sb, seed, rng):  # type: ignore[no-untyped-def]
    """Where a band kernel branches on a cell (`u` the open cells, `pairs` those with two candidates): a
    cell with two candidates if any (a random one with a seed), else one with the fewest. -> (band, the
    cell's bit, its digits, rng)."""
    npairs = 0
    for b2 in range(nbands):
        npairs += popcount(pairs[b2])
    b, lb = 0, ZERO
    if npairs > 0:
        k = 0
        if seed != 0:
            rng = bits.rng_next(rng)
            k = np.int64(rng % np.uint64(npairs))
        for b2 in range(nbands):
            pc = popcount(pairs[b2])
            if k < pc:
                b, lb = b2, bits.pick_mask(pairs[b2], np.uint64(k))
                break
            k -= pc
    else:
        best, ties = ndigits + 1, 0
        for b2 in range(nbands):
            rest = u[b2]
            while rest:
                lb2 = rest & (~rest + ONE)
                rest ^= lb2
                pc = 0
                for d in range(ndigits):
                    pc += np.int64((f[sd * d + sb * b2] & lb2) != ZERO)
                if pc < best:
                    best, b, lb, ties = pc, b2, lb2, 1
                elif pc == best and seed != 0:
                    ties += 1
                    rng = bits.rng_next(rng)
                    if rng % np.uint64(ties) == ZERO:
                        b, lb = b2, lb2
    m = ZERO
    for d in range(ndigits):
        m |= np.uint64((f[sd * d + sb * b] & lb) != ZERO) << np.uint64(d)
    return b, lb, m, rng


@njit(cache=True, nogil=True, inline="always")
def band_search(givens, ask, stop, out, shape, tabs, load, fixpoint, choose, apply, row_peers):  # type: ignore[no-untyped-def]
    """The search loop of both band kernels (common exact signature): `shape` is (nbands, ndigits, sd, sb,
    words of `occ`, snapshot levels); the hooks are the kernel's, inlined (separate arguments, not a tuple:
    only a hook passed by name is): `load` places a puzzle's givens (-> branch on configurations),
    `fixpoint(f, u, pairs, occ, todo, dd, tabs)` propagates (-> no contradiction), `choose` picks a
    configuration (-> band, digit, configurations; band -1: none), `apply` commits digit d to configuration
    p of band k (rows, then stacks) (-> the words to update), `row_peers(bit)` the rest of a cell's row."""
    nbands, ndigits, sd, sb, nocc, levels = shape
    limit, keep, max_nodes, _, _, seed = ask
    nw = nbands * ndigits
    width = nw + nbands + nocc  # a snapshot: the words, the open cells of each band, `occ`
    # separate arrays (views of one were slower), borrowed: the hooks take them without reference counts
    owners = (
        np.empty(nw, dtype=np.uint64),
        np.empty(nbands, dtype=np.uint64),
        np.empty(max(nocc, 1), dtype=np.uint64),
        np.empty(nbands, dtype=np.uint64),
    )
    f, u = bits.borrowed(owners[0]), bits.borrowed(owners[1])
    occ, pairs = bits.borrowed(owners[2]), bits.borrowed(owners[3])
    stk = np.empty((levels, width), dtype=np.uint64)
    stk_b = np.empty(levels, dtype=np.int64)
    stk_lb = np.empty(levels, dtype=np.uint64)
    stk_rem = np.empty(levels, dtype=np.uint64)
    now = monotonic_ns()  # one clock read a puzzle: a puzzle's end is the next one's start
    for i in range(givens.shape[0]):
        end_ns, status = bits.start_puzzle(i, now, ask, stop, out)
        if status != bits.GO_ON:  # stopped, or out of time before it began (recorded)
            continue
        rng = bits.rng_init(seed, i) if seed != 0 else ONE  # the stream only serves a seed
        by_config = load(givens[i], f, u, occ, tabs)
        todo, dd = ALL >> np.uint64(64 - nw), ALL >> np.uint64(64 - ndigits)  # every word and digit
        count, nodes, guesses, depth, status = 0, 1, 0, 0, DONE
        while True:
            ok = fixpoint(f, u, pairs, occ, todo, dd, tabs)
            left = ZERO
            for b in range(nbands):
                left |= u[b]
            if ok and left == ZERO:  # every cell placed: a solution
                if count < keep:
                    band_grid(f, out[0][i, count], nbands, ndigits, sd, sb)
                count += 1
                if count >= limit:
                    status = LIMIT
                    break
                ok = False
            if max_nodes > 0 and nodes >= max_nodes and (ok or depth > 0):
                status = BUDGET
                break
            if ok:  # branch
                b, lb, m = -1, ZERO, ZERO
                if by_config:
                    kb, kd, km = choose(f, occ, tabs)
                    if kb >= 0:
                        b, lb, m = nbands + kb, np.uint64(kd), km
                if b < 0:
                    b, lb, m, rng = cell_branch(f, u, pairs, nbands, ndigits, sd, sb, seed, rng)
                bits.copy_items(stk, depth * width, f, 0, nw)
                bits.copy_items(stk, depth * width + nw, u, 0, nbands)
                bits.copy_items(stk, depth * width + nw + nbands, occ, 0, nocc)
                stk_b[depth], stk_lb[depth] = b, lb
                depth += 1
            else:  # back to the deepest branch with a digit left to try
                if depth == 0:
                    break
                depth -= 1
                bits.copy_items(f, 0, stk, depth * width, nw)
                bits.copy_items(u, 0, stk, depth * width + nw, nbands)
                bits.copy_items(occ, 0, stk, depth * width + nw + nbands, nocc)
                b, lb, m = stk_b[depth], stk_lb[depth], stk_rem[depth]
            v, rng = bits.pick_value(m, seed != 0, rng)
            stk_rem[depth - 1 if ok else depth] = m & ~v
            if m != v:  # a binary branch point: this alternative, or one of the others
                guesses += 1
            if ok or m != v:
                depth += 0 if ok else 1  # keep the level while digits are left to try
            nodes += 1
            halt = bits.interrupted(stop, end_ns) if (nodes & bits.CHECK_EVERY) == 0 else bits.GO_ON
            if halt != bits.GO_ON:
                status = halt
                break
            if b < nbands:  # a digit in a cell
                d = ctz(v)
                j = sd * d + sb * b
                f[j] &= ~row_peers(lb)
                todo = ONE << np.uint64(j)
            else:  # a configuration of a digit in a band of rows or a stack
                d = np.int64(lb)
                todo = apply(f, b - nbands, d, ctz(v), tabs)
            dd = ONE << np.uint64(d)
        now = bits.record_puzzle(i, count, status, nodes, guesses, now, out)
        if now < 0:
            break
    bits.kept(owners)
