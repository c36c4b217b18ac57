"""The SAT member's encoding: one Boolean per open cell and remaining candidate, built with numpy.

Why lean: a clause-learning solver slows as its clause database grows, and the plain encoding with
pairwise at-most-one grows as N^4 (a 64x64 grid with three quarters open: 5.4M clauses, 3 s to build).
So the exact kernel's root propagation (`root_candidates`) runs first: fixed cells get no variable,
removed candidates no literal. Each cell, and each value of each unit, holds exactly one literal: one
clause for at least one; at most one pairwise up to `PAIRWISE_UP_TO` literals (they propagate best), a
sequential counter above. The binary clauses are one int32 array fed in blocks. UNSAT is a proof of no
solution (the root filtering is sound).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from solvers.exact.propagation import root_candidates
from solvers.model.geometry import geometry
from solvers.model.puzzle import Puzzle

PAIRWISE_UP_TO = 16  # literals of an exactly-one group encoded pairwise; longer: sequential counter
BLOCK = 65_536  # binary clauses handed to the solver per call (bounds the Python lists alive)


@dataclass(frozen=True)
class Cnf:
    """A puzzle's clauses: `long` (at-least-one: int32[L], each clause closed by a 0) and `binary`
    (int32[C, 2], at-most-one); variable k (1-based) up to `len(cell)` is `cell[k-1] = value[k-1]`, the
    rest are auxiliaries; `fixed` is the grid of the cells fixed at the root (0: open)."""

    long: np.ndarray
    binary: np.ndarray
    cell: np.ndarray  # int32[M]
    value: np.ndarray  # uint8[M], 1-based
    fixed: np.ndarray  # uint8[N*N]
    variables: int

    @property
    def clauses(self) -> int:
        """The number of clauses."""
        return int(np.count_nonzero(self.long == 0)) + int(self.binary.shape[0])

    def blocks(self, size: int = BLOCK) -> Iterator[list[list[int]]]:
        """Yield every clause, the long ones first, as lists of literals in lists of at most `size` clauses
        (python-sat's solver takes a clause a call)."""
        ends = np.flatnonzero(self.long == 0).tolist()
        flat = self.long.tolist()
        long = [flat[a + 1 : b] for a, b in zip([-1, *ends[:-1]], ends, strict=True)]
        for start in range(0, len(long), size):
            yield long[start : start + size]
        for start in range(0, self.binary.shape[0], size):
            yield self.binary[start : start + size].tolist()

    def flat_blocks(self, size: int = BLOCK) -> Iterator[np.ndarray]:
        """Yield every clause as `blocks` does, each block one int32 array with each clause closed by a 0
        (the long ones in one block)."""
        if self.long.size:
            yield self.long
        for start in range(0, self.binary.shape[0], size):
            part = self.binary[start : start + size]
            yield np.concatenate([part, np.zeros((part.shape[0], 1), dtype=np.int32)], axis=1).ravel()


def _open(cand: np.ndarray, n: int) -> np.ndarray:
    """bool[NN, N]: the candidates of the open cells (a fixed cell gets no variable)."""
    has = ((cand[:, None] >> np.arange(n, dtype=np.uint64)) & np.uint64(1)).astype(bool)
    has[has.sum(axis=1) == 1] = False
    return has


def _groups(
    puzzle: Puzzle, cand: np.ndarray, fewest_first: bool, order_seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Number the open literals: -> (groups int32[G, N] of variable ids, 0-padded, their sizes, (cell, value)
    of each variable). `fewest_first`: the cells with fewest candidates get the lowest ids (CaDiCaL breaks
    score ties by lowest id: fail-first), else cell by cell; `order_seed` != 0: a random order from it."""
    n = puzzle.box.n
    has = _open(cand, n)
    cells, values = np.nonzero(has)
    ids = np.arange(1, cells.size + 1, dtype=np.int32)
    if order_seed:
        ids = np.random.default_rng(np.random.SeedSequence(order_seed)).permutation(ids)
    elif fewest_first:
        rank = np.argsort(has.sum(axis=1)[cells], kind="stable")
        ids[rank] = np.arange(1, cells.size + 1, dtype=np.int32)
    var = np.zeros(has.shape, dtype=np.int32)
    var[cells, values] = ids
    units = geometry(puzzle.box).units
    per_unit = var[units].transpose(0, 2, 1).reshape(-1, n)  # [3N * N, N]: unit u, value v -> its places
    groups = np.concatenate([var, per_unit])
    groups = -np.sort(-groups, axis=1)  # ids first, padding last
    sizes = (groups > 0).sum(axis=1)
    keep = sizes > 0
    lit_cell = np.empty(cells.size, dtype=np.int32)
    lit_value = np.empty(cells.size, dtype=np.uint8)
    lit_cell[ids - 1] = cells
    lit_value[ids - 1] = values + 1
    return groups[keep], sizes[keep], np.stack([lit_cell, lit_value.astype(np.int32)])


def clause_count(sizes: np.ndarray, pairwise_up_to: int = PAIRWISE_UP_TO) -> int:
    """The clauses `encode` makes for exactly-one groups of these sizes."""
    k = sizes.astype(np.int64)
    amo = np.where(k <= pairwise_up_to, k * (k - 1) // 2, np.maximum(0, 3 * k - 4))
    return int(k.size + amo.sum())


def _pairwise(groups: np.ndarray, sizes: np.ndarray, up_to: int) -> np.ndarray:
    """Binary clauses (-a, -b) for every pair of literals of the groups of at most `up_to`."""
    small = groups[sizes <= up_to]
    k = sizes[sizes <= up_to]
    width = min(up_to, groups.shape[1])
    i, j = np.triu_indices(width, k=1)
    if small.shape[0] == 0 or i.size == 0:
        return np.zeros((0, 2), dtype=np.int32)
    a = np.broadcast_to(small[:, i], (small.shape[0], i.size))
    b = small[:, j]
    ok = j[None, :] < k[:, None]
    return -np.stack([a[ok], b[ok]], axis=1)


def _sequential(groups: np.ndarray, sizes: np.ndarray, up_to: int, top: int) -> tuple[np.ndarray, int]:
    """Sinz's sequential counter for the groups longer than `up_to`: auxiliary s_i is true when
    one of the first i+1 literals is; -> (binary clauses, the last variable id used)."""
    big = groups[sizes > up_to]
    k = sizes[sizes > up_to]
    if big.shape[0] == 0:
        return np.zeros((0, 2), dtype=np.int32), top
    pos = np.broadcast_to(np.arange(big.shape[1]), big.shape)
    inside = pos < k[:, None]
    x = big[inside]  # literals, group by group
    p = pos[inside]
    last = np.repeat(k, k) - 1  # the position of each literal's group's last literal
    counted = p < last  # literals with an auxiliary of their own
    aux = np.zeros(x.size, dtype=np.int32)
    aux[counted] = np.arange(top + 1, top + 1 + int(counted.sum()), dtype=np.int32)
    top += int(counted.sum())
    prev = np.roll(aux, 1)  # s_{i-1}, meaningful where p > 0
    later = p > 0
    mid = later & counted
    clauses = [
        np.stack([-x[counted], aux[counted]], axis=1),  # x_i -> s_i
        np.stack([-prev[mid], aux[mid]], axis=1),  # s_{i-1} -> s_i
        np.stack([-x[later], -prev[later]], axis=1),  # not both x_i and s_{i-1}
    ]
    return np.concatenate(clauses).astype(np.int32), top


def encode(
    puzzle: Puzzle,
    *,
    pairwise_up_to: int = PAIRWISE_UP_TO,
    fewest_first: bool = True,
    order_seed: int = 0,
    cand: np.ndarray | None = None,
) -> Cnf | None:
    """Return the puzzle's CNF over its root candidates, or None when root propagation already
    proves it has no solution. `cand` (from `root_candidates`) saves propagating again."""
    cand = root_candidates(puzzle.box, puzzle.givens) if cand is None else cand
    if cand is None:
        return None
    fixed = np.where(np.bitwise_count(cand) == 1, np.bitwise_count(cand - np.uint64(1)) + 1, 0).astype(
        np.uint8
    )
    groups, sizes, lits = _groups(puzzle, cand, fewest_first, order_seed)
    top = lits.shape[1]
    pairs = _pairwise(groups, sizes, pairwise_up_to)
    counter, top = _sequential(groups, sizes, pairwise_up_to, top)
    closed = np.concatenate([groups, np.zeros((groups.shape[0], 1), dtype=groups.dtype)], axis=1)
    long = closed[np.arange(closed.shape[1])[None, :] <= sizes[:, None]].astype(np.int32)  # ids, then a 0
    binary = np.concatenate([pairs, counter]).astype(np.int32)
    return Cnf(long, binary, lits[0].astype(np.int32), lits[1].astype(np.uint8), fixed, top)


def estimate(puzzle: Puzzle, cand: np.ndarray | None, pairwise_up_to: int = PAIRWISE_UP_TO) -> int:
    """The clauses `encode` would make (without making them), 0 when root propagation refutes."""
    if cand is None:
        return 0
    n = puzzle.box.n
    has = _open(cand, n)
    per_unit = has[geometry(puzzle.box).units].sum(axis=1).ravel()  # [3N * N] places per unit and value
    sizes = np.concatenate([has.sum(axis=1), per_unit])
    return clause_count(sizes[sizes > 0], pairwise_up_to)


def decode(model: list[int], cnf: Cnf) -> np.ndarray:
    """Return the grid (uint8[N*N]) of a model: the root's fixed cells, then each true literal
    (auxiliaries are not read)."""
    grid = cnf.fixed.copy()
    m = np.asarray(model[: len(cnf.cell)], dtype=np.int64)
    true = m[m > 0] - 1
    true = true[true < len(cnf.cell)]
    grid[cnf.cell[true]] = cnf.value[true]
    return grid
