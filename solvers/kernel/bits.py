"""Bit and random-number primitives shared by the compiled kernels, and their shared scaffolding.

Hardware popcount / trailing-zero count, array copy and fill intrinsics (cheap to compile), the
per-puzzle xorshift64 stream, the deadline/stop check, and the steps of the two band kernels. numba's
on-disk cache does not notice edits to a module a cached function calls (`tie_caches` closes that gap
where it is used): after editing this file during development run `make clean-cache`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from solvers.kernel.clock import monotonic_ns
from solvers.kernel.outcome import BUDGET, DONE, LIMIT, STOPPED, TIMEOUT


def tie_caches(dispatchers: list[Any], modules: list[Any]) -> None:
    """Make the on-disk caches of `dispatchers` stale whenever one of `modules` changes: numba stamps a
    cache with its function's own source file only. Internal numba attributes: without them, nothing."""
    extra = b"".join(hashlib.sha256(Path(m.__file__).read_bytes()).digest() for m in modules)
    for d in dispatchers:
        try:
            cache_file = d._cache._cache_file
            cache_file._source_stamp = (cache_file._source_stamp, extra)
        except AttributeError:
            pass


ONE = np.uint64(1)
ZERO = np.uint64(0)
ALL = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


@intrinsic
def popcount(typingctx, x):  # type: ignore[no-untyped-def]
    """Population count (llvm.ctpop) of an unsigned integer, as int64."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        r = builder.ctpop(args[0])
        return builder.zext(r, ir.IntType(64)) if r.type.width < 64 else r

    return types.int64(x), codegen


@intrinsic
def ctz(typingctx, x):  # type: ignore[no-untyped-def]
    """Trailing zero count (llvm.cttz) of a non-zero unsigned integer, as int64."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        r = builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))
        return builder.zext(r, ir.IntType(64)) if r.type.width < 64 else r

    return types.int64(x), codegen


@intrinsic
def copy_items(typingctx, dst, dst_at, src, src_at, count):  # type: ignore[no-untyped-def]
    """Copy `count` items of C-contiguous `src` from flat index `src_at` to `dst` from `dst_at` (distinct
    arrays, one dtype) as one llvm.memcpy: a loop or a slice assignment costs seconds of compile time."""
    ok = (
        isinstance(dst, types.Array)
        and isinstance(src, types.Array)
        and dst.dtype == src.dtype
        and dst.layout == src.layout == "C"
    )
    if not ok:
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        d = context.make_array(signature.args[0])(context, builder, args[0])
        s = context.make_array(signature.args[2])(context, builder, args[2])
        at_d = context.cast(builder, args[1], signature.args[1], types.int64)
        at_s = context.cast(builder, args[3], signature.args[3], types.int64)
        n = context.cast(builder, args[4], signature.args[4], types.int64)
        size = context.get_abi_sizeof(context.get_data_type(signature.args[0].dtype))
        cgutils.raw_memcpy(builder, builder.gep(d.data, [at_d]), builder.gep(s.data, [at_s]), n, size)
        return context.get_dummy_value()

    return types.none(dst, dst_at, src, src_at, count), codegen


@intrinsic
def fill_items(typingctx, dst, dst_at, value, count):  # type: ignore[no-untyped-def]
    """Set `count` items of the C-contiguous array `dst` from flat index `dst_at` to `value`.
    A loop `for j in range(start, stop): a[j] = v` compiles the negative-index wraparound of
    every item (LLVM cannot see that start >= 0) into a vectorized scatter of 32 stores."""
    if not (isinstance(dst, types.Array) and dst.layout == "C"):
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        d = context.make_array(signature.args[0])(context, builder, args[0])
        at = context.cast(builder, args[1], signature.args[1], types.int64)
        v = context.cast(builder, args[2], signature.args[2], signature.args[0].dtype)
        v = context.get_value_as_data(builder, signature.args[0].dtype, v)
        n = context.cast(builder, args[3], signature.args[3], types.int64)
        base = builder.gep(d.data, [at])
        with cgutils.for_range(builder, n) as loop:
            builder.store(v, builder.gep(base, [loop.index]))
        return context.get_dummy_value()

    return types.none(dst, dst_at, value, count), codegen


@njit(cache=True, nogil=True)
def rng_next(state):  # type: ignore[no-untyped-def]
    """One xorshift64 step (the state must be non-zero)."""
    state ^= state << np.uint64(13)
    state ^= state >> np.uint64(7)
    state ^= state << np.uint64(17)
    return state


@njit(cache=True, nogil=True)
def rng_init(seed, index):  # type: ignore[no-untyped-def]
    """A non-zero xorshift64 state for puzzle `index` of a batch run with `seed` (splitmix64)."""
    z = np.uint64(seed) + np.uint64(index + 1) * np.uint64(0x9E37_79B9_7F4A_7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58_476D_1CE4_E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D0_49BB_1331_11EB)
    z = z ^ (z >> np.uint64(31))
    return z if z != ZERO else np.uint64(0x2545_F491_4F6C_DD1D)


GO_ON = -1  # not an outcome (`solvers.kernel.outcome` codes are >= 0): nothing ends the search yet


@njit(cache=True, nogil=True)
def interrupted(stop, end_ns):  # type: ignore[no-untyped-def]
    """Return STOPPED, TIMEOUT, or GO_ON (`end_ns` 0 = no time limit)."""
    if stop[0] != 0:
        return STOPPED
    if end_ns != 0 and monotonic_ns() >= end_ns:
        return TIMEOUT
    return GO_ON


# The per-puzzle scaffolding every exact kernel shares (`ask` and `out`: see `solvers.exact.base`).
CHECK_EVERY = 255  # nodes between two looks at the clock and the stop flag (a mask)


@njit(cache=True, nogil=True, inline="always")
def start_puzzle(i, t0, ask, stop, out):  # type: ignore[no-untyped-def]
    """Start puzzle i at `t0`: -> (end_ns, status): end_ns is the earlier of the batch deadline
    and t0 + the time limit (0 = none); a status other than GO_ON (STOPPED, TIMEOUT) is recorded
    as the puzzle's outcome and means do not start it."""
    end_ns = ask[4]
    if ask[3] > 0 and (end_ns == 0 or t0 + ask[3] < end_ns):
        end_ns = t0 + ask[3]
    status = STOPPED if stop[0] != 0 else (TIMEOUT if end_ns != 0 and t0 >= end_ns else GO_ON)
    if status != GO_ON:
        _, _, statuses, _, _, _ = out
        statuses[i] = status
    return end_ns, status


@njit(cache=True, nogil=True, inline="always")
def count_node(nodes, max_nodes, stop, end_ns):  # type: ignore[no-untyped-def]
    """Count one search node: -> (nodes, status); a status other than GO_ON (BUDGET, TIMEOUT, STOPPED) ends
    the search. The clock is read every CHECK_EVERY + 1 nodes only: it costs more than a node."""
    if max_nodes > 0 and nodes >= max_nodes:
        return nodes, BUDGET
    nodes += 1
    if (nodes & CHECK_EVERY) == 0:
        return nodes, interrupted(stop, end_ns)
    return nodes, GO_ON


@njit(cache=True, nogil=True, inline="always")
def pick_bit(mask, seed, rng):  # type: ignore[no-untyped-def]
    """Choose a set bit of `mask`: the lowest with seed 0 (a fixed order), else a random one
    from the puzzle's stream: -> (bit index, rng)."""
    if seed == 0:
        return ctz(mask), rng
    rng = rng_next(rng)
    return ctz(pick_mask(mask, rng)), rng


@njit(cache=True, nogil=True)
def pick_mask(m, r):  # type: ignore[no-untyped-def]
    """Return the (r mod popcount)-th set bit of `m` as a one-bit mask."""
    k = np.int64(r % np.uint64(popcount(m)))
    for _ in range(k):
        m &= m - ONE
    return m & (~m + ONE)


@njit(cache=True, nogil=True, inline="always")
def pick_value(m, rand, rng):  # type: ignore[no-untyped-def]
    """Choose a set bit of `m` as a one-bit mask: the lowest, or with `rand` a random one from the
    puzzle's stream: -> (mask, rng)."""
    if not rand:
        return m & (~m + ONE), rng
    rng = rng_next(rng)
    return pick_mask(m, rng), rng


@njit(cache=True, nogil=True, inline="always")
def record_puzzle(i, count, status, nodes, guesses, t0, out):  # type: ignore[no-untyped-def]
    """Write puzzle i's outcome; return the clock (the next puzzle's start), or -1 when it was
    STOPPED: every later puzzle is marked so and the batch ends (the stop flag is for the whole call)."""
    now = monotonic_ns()
    _, counts, statuses, nodes_, guesses_, ns = out
    counts[i], statuses[i], nodes_[i], guesses_[i], ns[i] = count, status, nodes, guesses, now - t0
    if status != STOPPED:
        return now
    fill_items(statuses, i + 1, STOPPED, statuses.shape[0] - i - 1)
    return -1


# The band kernels' shared steps (`propagation9`, `propagation16`): word sd*d + sb*b holds the cells of band b
# where digit d is possible, row after row. Inlined: the sizes, constants at the call, unroll their loops.


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
            rng = rng_next(rng)
            k = np.int64(rng % np.uint64(npairs))
        for b2 in range(nbands):
            pc = popcount(pairs[b2])
            if k < pc:
                b, lb = b2, pick_mask(pairs[b2], np.uint64(k))
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
                    rng = rng_next(rng)
                    if rng % np.uint64(ties) == ZERO:
                        b, lb = b2, lb2
    m = ZERO
    for d in range(ndigits):
        m |= np.uint64((f[sd * d + sb * b] & lb) != ZERO) << np.uint64(d)
    return b, lb, m, rng


@njit(cache=True, nogil=True, inline="always")
def band_search(givens, ask, stop, out, shape, tabs, load, fixpoint, choose, apply, row_peers):  # type: ignore[no-untyped-def]
    """The search loop of both band kernels (common exact signature), one copy: `shape` is (nbands, ndigits,
    sd, sb, words of `occ`, snapshot levels); the hooks, inlined, take the kernel's `tabs`: `load` places a
    puzzle's givens (-> branch on configurations), `fixpoint` propagates `todo` / `dd` (-> no contradiction),
    `choose` picks a configuration (-> band, digit, configurations; band -1: none), `apply` commits digit d to
    configuration p of band k (rows, then stacks) (-> the words to update)."""
    nbands, ndigits, sd, sb, nocc, levels = shape
    limit, keep, max_nodes, _, _, seed = ask
    nw = nbands * ndigits
    width = nw + nbands + nocc  # a snapshot: the words, the open cells of each band, `occ`
    st = np.empty(width, dtype=np.uint64)
    f, u, occ = st[:nw], st[nw : nw + nbands], st[nw + nbands :]
    pairs = np.empty(nbands, dtype=np.uint64)
    stk = np.empty((levels, width), dtype=np.uint64)
    stk_b = np.empty(levels, dtype=np.int64)
    stk_lb = np.empty(levels, dtype=np.uint64)
    stk_rem = np.empty(levels, dtype=np.uint64)
    now = monotonic_ns()  # one clock read a puzzle: a puzzle's end is the next one's start
    for i in range(givens.shape[0]):
        end_ns, status = start_puzzle(i, now, ask, stop, out)
        if status != GO_ON:  # stopped, or out of time before it began (recorded)
            continue
        rng = rng_init(seed, i) if seed != 0 else ONE  # the stream only serves a seed
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
                copy_items(stk, depth * width, st, 0, width)
                stk_b[depth], stk_lb[depth] = b, lb
                depth += 1
            else:  # back to the deepest branch with a digit left to try
                if depth == 0:
                    break
                depth -= 1
                copy_items(st, 0, stk, depth * width, width)
                b, lb, m = stk_b[depth], stk_lb[depth], stk_rem[depth]
            v, rng = pick_value(m, seed != 0, rng)
            stk_rem[depth - 1 if ok else depth] = m & ~v
            if m != v:  # a binary branch point: this alternative, or one of the others
                guesses += 1
            if ok or m != v:
                depth += 0 if ok else 1  # keep the level while digits are left to try
            nodes += 1
            halt = interrupted(stop, end_ns) if (nodes & CHECK_EVERY) == 0 else GO_ON
            if halt != GO_ON:
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
        now = record_puzzle(i, count, status, nodes, guesses, now, out)
        if now < 0:
            break
