"""The 16x16 (4x4 boxes) kernel of `propagation`: one 64-bit word per digit and band.

The 9x9 kernel's design (`propagation9`) one size up: f[4d+b] holds the cells of band b (four rows of
boxes, 64 cells) where digit d is still possible (bit 16*row_in_band + column); 4x4 occupancies are
filtered by `perm16`, a table of the 2^16 permutation unions. Puzzles with 96 givens or more branch on
configurations (`nconf16` counts them), sparser ones on a cell with two candidates (else the fewest). No
restarts and no carry: `propagation` hands a puzzle left open past a node budget to the generic kernel
(docs/decisions.md).
"""

from __future__ import annotations

import itertools

import numpy as np
from numba import njit

from solvers.kernel.band import band_columns_out, band_search, band_singles
from solvers.kernel.bits import ALL, ONE, ZERO, borrowed, ctz, popcount

_ROW = np.uint64(0xFFFF)
_NIB = np.uint64(0x1111_1111_1111_1111)  # the low bit of every group of four cells (a box's row)
_GATHER4 = np.uint64(0x249)  # multiplier: bits 4k of a row -> bits 9 + k (no carries)
_GATHER16 = np.uint64((1 << 36) | (1 << 24) | (1 << 12) | 1)  # nibbles 16r -> 36 + 4r
_LOW_NIBS = np.uint64(0x000F_000F_000F_000F)
CONFIG_BRANCH = True  # else branch on a cell with two candidates (else the fewest)
CONFIG_FROM_GIVENS = 96  # givens from which a puzzle branches on configurations
DEPTH = 258  # snapshot levels: one per decision, at most one per open cell


def build_nconf16() -> np.ndarray:
    """nconf16[s]: how many permutations (of `build_perm16`) the 4x4 occupancy s contains."""
    s = np.arange(1 << 16, dtype=np.int64)
    out = np.zeros(1 << 16, dtype=np.uint8)
    for mask in _PMASK16.astype(np.int64):
        out += ((s & mask) == mask).astype(np.uint8)
    return out


def build_perm16() -> np.ndarray:
    """perm16[s]: for a 4x4 occupancy s (bit 4i + j: line i meets segment j), the union of
    the permutations inside it (one segment per line, each segment once), 0 when none."""
    s = np.arange(1 << 16, dtype=np.int64)
    out = np.zeros(1 << 16, dtype=np.uint16)
    for mask in _PMASK16.astype(np.int64):
        out[(s & mask) == mask] |= np.uint16(mask)
    return out


_PERMS4 = list(itertools.permutations(range(4)))
_PMASK16 = np.array([sum(1 << (4 * i + p[i]) for i in range(4)) for p in _PERMS4], dtype=np.uint64)
_PCOL16 = np.array([[p[i] for i in range(4)] for p in _PERMS4], dtype=np.int64)  # band i's column in a stack
_EXP4 = np.array([sum(0xF << (4 * k) for k in range(4) if (v >> k) & 1) for v in range(16)], dtype=np.uint64)


@njit(cache=True, nogil=True)
def _occupancy(a):  # type: ignore[no-untyped-def]
    """A band word's 4x4 occupancy: bit 4r + k when row r has a cell in box k."""
    z = (a | (a >> ONE) | (a >> np.uint64(2)) | (a >> np.uint64(3))) & _NIB
    t = ((z * _GATHER4) >> np.uint64(9)) & _LOW_NIBS
    return ((t * _GATHER16) >> np.uint64(36)) & _ROW


@njit(cache=True, nogil=True)
def _box_set(a):  # type: ignore[no-untyped-def]
    """The 4-bit set of the boxes where a band word has a cell."""
    x = _columns(a)
    z = (x | (x >> ONE) | (x >> np.uint64(2)) | (x >> np.uint64(3))) & _NIB
    return ((z * _GATHER4) >> np.uint64(9)) & np.uint64(15)


@njit(cache=True, nogil=True)
def _expand(m):  # type: ignore[no-untyped-def]
    """The cells of a 4x4 occupancy m (bit 4r + k: row r's four cells in box k)."""
    return (
        _EXP4[m & np.uint64(15)]
        | (_EXP4[(m >> np.uint64(4)) & np.uint64(15)] << np.uint64(16))
        | (_EXP4[(m >> np.uint64(8)) & np.uint64(15)] << np.uint64(32))
        | (_EXP4[m >> np.uint64(12)] << np.uint64(48))
    )


@njit(cache=True, nogil=True)
def _columns(a):  # type: ignore[no-untyped-def]
    """The 16-bit set of columns where a band word has a cell."""
    return (a | (a >> np.uint64(16)) | (a >> np.uint64(32)) | (a >> np.uint64(48))) & _ROW


@njit(cache=True, nogil=True)
def _spread(x):  # type: ignore[no-untyped-def]
    """A 16-bit column set repeated on the four rows of a band."""
    return x | (x << np.uint64(16)) | (x << np.uint64(32)) | (x << np.uint64(48))


@njit(cache=True, nogil=True)
def _row_peers(lb):  # type: ignore[no-untyped-def]
    """The other cells of the band row holding the one-bit mask `lb`."""
    return (_ROW << np.uint64(ctz(lb) & ~15)) ^ lb


@njit(cache=True, nogil=True)
def _rows_single(a):  # type: ignore[no-untyped-def]
    """The cells of a band word alone in their row."""
    out = ZERO
    for r in range(4):
        x = a & (_ROW << np.uint64(16 * r))
        if (x & (x - ONE)) == ZERO:
            out |= x
    return out


@njit(cache=True, nogil=True)
def _stack_update(f, d, perm16):  # type: ignore[no-untyped-def]
    """Column-wise update of digit d's four band words: the (band x column) permutation filter
    of each stack, then hidden singles in columns. -> (ok, 4-bit set of changed bands)."""
    c0, c1 = _columns(f[4 * d]), _columns(f[4 * d + 1])
    c2, c3 = _columns(f[4 * d + 2]), _columns(f[4 * d + 3])
    k0, k1, k2, k3 = ZERO, ZERO, ZERO, ZERO
    fifteen = np.uint64(15)
    for t in range(4):
        sh = np.uint64(4 * t)
        s = ((c0 >> sh) & fifteen) | (((c1 >> sh) & fifteen) << np.uint64(4))
        s |= (((c2 >> sh) & fifteen) << np.uint64(8)) | (((c3 >> sh) & fifteen) << np.uint64(12))
        m = np.uint64(perm16[s])
        if m == ZERO:
            return False, 0
        k0 |= (m & fifteen) << sh
        k1 |= ((m >> np.uint64(4)) & fifteen) << sh
        k2 |= ((m >> np.uint64(8)) & fifteen) << sh
        k3 |= ((m >> np.uint64(12)) & fifteen) << sh
    one, two = ZERO, ZERO  # columns holding the digit once, twice or more (over the 16 rows)
    changed = 0
    for b in range(4):
        k = k0 if b == 0 else (k1 if b == 1 else (k2 if b == 2 else k3))
        a = f[4 * d + b]
        a2 = a & _spread(k)
        if a2 != a:
            f[4 * d + b] = a2
            changed |= 1 << b
        for r in range(4):
            x = (a2 >> np.uint64(16 * r)) & _ROW
            two |= one & x
            one |= x
    single = one & ~two
    if single == ZERO:
        return True, changed
    for b in range(4):
        a = f[4 * d + b]
        x = a & _spread(single)
        a2 = a
        while x:
            lb = x & (~x + ONE)
            x ^= lb
            a2 &= ~_row_peers(lb)
        if a2 != a:
            f[4 * d + b] = a2
            changed |= 1 << b
    return True, changed


@njit(cache=True, nogil=True, inline="always")
def _stack_occupancy(f, d, t):  # type: ignore[no-untyped-def]
    """Digit d's 4x4 occupancy of stack t: bit 4i + j when band i has a cell in the stack's column j.
    Inlined: LLVM left it a call in the shared search (5% CPU where puzzles branch on configurations)."""
    sh, fifteen, s = np.uint64(4 * t), np.uint64(15), ZERO
    for i in range(4):
        s |= ((_columns(f[4 * d + i]) >> sh) & fifteen) << np.uint64(4 * i)
    return s


@njit(cache=True, nogil=True, inline="always")
def _choose(f, occ, tabs):  # type: ignore[no-untyped-def]
    """Where to branch: of the eight bands (0-3 rows, 4-7 stacks) the unfixed one with the fewest
    digit configurations, and in it a digit with the fewest (two if any). -> (band, digit, the
    24-bit set of its configurations), band -1 when every band is fixed."""
    nconf16 = tabs[1]
    best, bb = 10**6, -1
    for k in range(8):
        tot = 0
        for d in range(16):
            s = _occupancy(f[4 * d + k]) if k < 4 else _stack_occupancy(f, d, k - 4)
            tot += np.int64(nconf16[s])
        if 16 < tot < best:
            best, bb = tot, k
    if bb < 0:
        return -1, 0, ZERO
    bd, bc, bs = 0, 25, ZERO
    for d in range(16):
        s = _occupancy(f[4 * d + bb]) if bb < 4 else _stack_occupancy(f, d, bb - 4)
        pc = np.int64(nconf16[s])
        if 1 < pc < bc:
            bd, bc, bs = d, pc, s
            if pc == 2:
                break
    m = ZERO
    for p in range(24):
        m |= np.uint64((bs & _PMASK16[p]) == _PMASK16[p]) << np.uint64(p)
    return bb, bd, m


@njit(cache=True, nogil=True, inline="always")
def _load(row, f, u, occ, tabs):  # type: ignore[no-untyped-def]
    """Place a puzzle's givens at once (each leaves its row, box, column and cell): -> branch on
    configurations (`band_search`'s `load`)."""
    clue = tabs[2]
    for k in range(72):
        clue[k] = ZERO
    for b in range(4):  # without branches: slots 0-3 take the blanks
        for p in range(64):
            clue[4 * min(np.int64(row[64 * b + p]), 17) + b] |= ONE << np.uint64(p)
    if (clue[68] | clue[69] | clue[70] | clue[71]) != ZERO:
        clue[4] = ALL  # a value above 16: report the puzzle unsolvable (digit 1 clashes)
    for b in range(4):
        g = ZERO
        for d in range(16):
            g |= clue[4 * d + 4 + b]
        u[b] = ~g
        for d in range(16):
            c = clue[4 * d + 4 + b]
            cols = _spread(_columns(clue[4 * d + 4] | clue[4 * d + 5] | clue[4 * d + 6] | clue[4 * d + 7]))
            rows = ZERO  # without branches
            for r in range(4):
                sh = np.uint64(16 * r)
                rows |= (_ROW * np.uint64(((c >> sh) & _ROW) != ZERO)) << sh
            gone = rows | cols | g | _spread(_EXP4[_box_set(c)])
            f[4 * d + b] = ~gone | c
    # configurations to branch on in puzzles with 96 givens or more (37.5%), cells in sparser
    # grids: there committing a digit's band configuration thrashes (acs 16x16 with 64-95
    # givens: 153 of 300 over 1000 nodes, against 1 of 200 from 96)
    ngiven = popcount(~u[0]) + popcount(~u[1]) + popcount(~u[2]) + popcount(~u[3])
    return CONFIG_BRANCH and ngiven >= CONFIG_FROM_GIVENS


@njit(cache=True, nogil=True, inline="always")
def _fixpoint(f, u, pairs, occ, todo, dd, tabs):  # type: ignore[no-untyped-def]
    """Propagate the words in `todo` (band updates) and the digits in `dd` (stack updates) to a fixpoint:
    -> False on a contradiction."""
    perm16 = tabs[0]
    while True:
        while todo:
            j = ctz(todo)
            todo &= todo - ONE
            d = j >> 2
            b = j & 3
            a = f[j]
            m = np.uint64(perm16[_occupancy(a)])
            if m == ZERO:
                return False
            a2 = a & _expand(m)
            dd |= np.uint64(a2 != a) << np.uint64(d)
            f[j] = a2
            new = _rows_single(a2) & u[b]
            if new == ZERO:
                continue
            u[b] &= ~new  # placed: the cells leave the other digits, the columns the other bands
            for d2 in range(16):
                j2 = 4 * d2 + b
                x = f[j2]
                y = x & ~new if d2 != d else x
                f[j2] = y
                ch = np.uint64(x != y)
                todo |= ch << np.uint64(j2)
                dd |= ch << np.uint64(d2)
            todo, dd = band_columns_out(f, _spread(_columns(new)), d, b, 4, 4, 1, todo, dd)
        if dd:
            cur, dd = dd, ZERO
            while cur:
                d = ctz(cur)
                cur &= cur - ONE
                good, changed = _stack_update(f, d, perm16)
                if not good:
                    return False
                if changed:
                    todo |= np.uint64(changed) << np.uint64(4 * d)
                    dd |= ONE << np.uint64(d)
            if todo:
                continue
        ok, found, todo, dd = band_singles(f, u, pairs, 4, 16, 4, 1, _row_peers, todo, dd)
        if not ok or not found:
            return ok


@njit(cache=True, nogil=True, inline="always")
def _apply(f, k, d, p, tabs):  # type: ignore[no-untyped-def]
    """Keep digit d to configuration p of band k (0-3 rows, 4-7 stacks: band i keeps one column of the
    stack): -> the words to update."""
    if k < 4:
        f[4 * d + k] &= _expand(_PMASK16[p])
        return ONE << np.uint64(4 * d + k)
    stack = _spread(np.uint64(15) << np.uint64(4 * (k - 4)))
    for i in range(4):
        f[4 * d + i] &= ~stack | _spread(ONE << np.uint64(4 * (k - 4) + _PCOL16[p, i]))
    return np.uint64(15) << np.uint64(4 * d)


@njit(cache=True, nogil=True)
def kernel16(perm16, nconf16, givens, ask, stop, out):  # type: ignore[no-untyped-def]
    """The 16x16 kernel: `perm16` and `nconf16` (see `build_perm16`, `build_nconf16`), then the
    common exact signature."""
    clue = np.empty(18 * 4, dtype=np.uint64)  # the givens' cells: slots 0-3 the blanks, 68-71 values > 16
    shape = (4, 16, 4, 1, 0, DEPTH)  # snapshots of 68 words
    tabs = (borrowed(perm16), borrowed(nconf16), clue)  # the caller owns the tables: no counts per node
    band_search(givens, ask, stop, out, shape, tabs, _load, _fixpoint, _choose, _apply, _row_peers)
