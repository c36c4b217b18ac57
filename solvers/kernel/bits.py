"""Bit and random-number primitives shared by the compiled kernels, and their shared scaffolding.

Hardware popcount / trailing-zero count, array copy and fill intrinsics (cheap to compile), borrowed
arrays (no reference counts in a kernel's loop), the per-puzzle xorshift64 stream, the deadline/stop
check and the per-puzzle bookkeeping. numba's on-disk cache does not notice edits to a module a cached
function calls (`tie_caches` closes that gap where it is used): after editing this file during
development run `make clean-cache`.
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
from solvers.kernel.outcome import BUDGET, STOPPED, TIMEOUT


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
    """Set `count` items of C-contiguous `dst` from flat index `dst_at` to `value`: a loop compiles the
    negative-index wraparound of every item into a vectorized scatter of 32 stores."""
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


@intrinsic
def borrowed(typingctx, arr):  # type: ignore[no-untyped-def]
    """`arr` without its owner (null meminfo), for a kernel's working arrays: each array a hook inlined
    into a loop takes would cost an atomic incref and decref per call. The owner must outlive it (`kept`)."""
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        view = context.make_array(signature.args[0])(context, builder, args[0])
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        return view._getvalue()

    return arr(arr), codegen


@intrinsic
def kept(typingctx, owners):  # type: ignore[no-untyped-def]
    """Nothing, but a use of `owners`: numba frees an array after its last use, and the `borrowed` views of
    these are used up to here."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return context.get_dummy_value()

    return types.none(owners), codegen


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
