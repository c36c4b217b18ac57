"""The one contract of every exact solver, and how each registers itself (`solvers.registry`).

Every exact solver is a numba kernel wrapped by `KernelSolver`; after its own geometry tables it takes
    givens uint8[B, NN] (0 empty), ask (limit, keep, max_nodes, time_limit_ns, deadline_ns, seed: six
    i64), stop i64[1] (raised by another thread), out (`ExactBatch.arrays`, written in place).
limit 1 solves, 2 proves unique, k counts up to k; seed 0 is the solver's fixed order; kernels read the
clock themselves (`solvers.kernel.clock`) and share the per-puzzle scaffolding of `solvers.kernel.bits`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from solvers import registry
from solvers.kernel.outcome import OUTCOME_NAMES
from solvers.model.puzzle import Box, Puzzle
from solvers.registry import Kind, KindView


@dataclass
class ExactBatch:
    """What an exact solver returns for a batch: arrays aligned with its input."""

    solutions: np.ndarray  # uint8[B, keep, NN]: the first `keep` solutions found
    counts: np.ndarray  # int64[B]: solutions found (exact when status is DONE)
    status: np.ndarray  # int8[B]: DONE, LIMIT, TIMEOUT, BUDGET or STOPPED
    nodes: np.ndarray  # int64[B]: search nodes visited
    guesses: np.ndarray  # int64[B]: branching decisions taken
    ns: np.ndarray  # int64[B]: nanoseconds spent per puzzle

    @property
    def arrays(self) -> tuple[np.ndarray, ...]:
        """The kernel's `out`: (solutions, counts, status, nodes, guesses, ns), written in place."""
        return (self.solutions, self.counts, self.status, self.nodes, self.guesses, self.ns)


@dataclass
class ExactOutcome:
    """One puzzle's exact-solver outcome: solutions found, status name and counters."""

    solutions: list[np.ndarray]
    count: int
    status: str  # one of OUTCOME_NAMES' values
    nodes: int
    guesses: int
    elapsed: float

    @property
    def complete(self) -> bool:
        """True when the search finished: `count` is exact (up to the limit)."""
        return self.status in ("done", "limit")


Tables = Callable[[Box], tuple[Any, ...]]


@dataclass(frozen=True)
class KernelSolver:
    """An exact solver: a name, a compiled kernel of the common signature, and the
    function giving the kernel its geometry tables for a box shape."""

    name: str
    kernel: Callable[..., None]
    tables: Tables
    summary: str = ""
    # Box shapes for which the kernel also takes `carry=` (see `new_carry`); None: none.
    resumable: Callable[[Box], bool] | None = None

    def carries(self, box: Box) -> bool:
        """Whether `solve_batch` takes a carry for this box shape."""
        return self.resumable is not None and self.resumable(box)

    def new_carry(self, box: Box) -> np.ndarray:
        """A fresh carry for one puzzle: int64[3 + 3N] zeros (runs, random stream, nodes, unit weights), so
        that calls of `solve_batch(..., carry=c)` each run the next restart of one search, not start over."""
        return np.zeros(3 + 3 * box.n, dtype=np.int64)

    def solve_batch(
        self,
        givens: np.ndarray,
        box: Box,
        *,
        limit: int = 1,
        keep: int = 1,
        max_nodes: int = 0,
        time_limit: float | None = None,
        deadline_ns: int = 0,
        seed: int = 0,
        stop: np.ndarray | None = None,
        carry: np.ndarray | None = None,
    ) -> ExactBatch:
        """Solve every row of `givens` (uint8[B, N*N]) and return the aligned arrays. With `carry` (one
        puzzle, limit 1) one restart of a search resumed across calls: BUDGET until a run decides."""
        givens = np.ascontiguousarray(givens, dtype=np.uint8).reshape(-1, box.cells)
        b = givens.shape[0]
        if limit < 1:
            raise ValueError("limit must be at least 1")
        extra: dict[str, np.ndarray] = {}
        if carry is not None:
            if not self.carries(box):
                raise ValueError(f"{self.name} takes no carry for box {box.rows}x{box.cols}")
            if b != 1 or limit != 1 or carry.dtype != np.int64 or carry.shape != (3 + 3 * box.n,):
                raise ValueError("a carry is for one puzzle, limit 1: int64[3 + 3N] from new_carry")
            extra["carry"] = carry
        keep = max(1, min(keep, limit))
        kinds = (np.int64, np.int8, np.int64, np.int64, np.int64)  # counts, status, nodes, guesses, ns
        out = ExactBatch(
            np.zeros((b, keep, box.cells), dtype=np.uint8), *(np.zeros(b, dtype=k) for k in kinds)
        )
        if b == 0:
            return out
        stop = np.zeros(1, dtype=np.int64) if stop is None else stop
        tl_ns = 0 if time_limit is None else max(1, int(time_limit * 1e9))
        ask = (limit, keep, max_nodes, tl_ns, deadline_ns, seed & 0x7FFF_FFFF_FFFF_FFFF)
        self.kernel(*self.tables(box), givens, tuple(np.int64(x) for x in ask), stop, out.arrays, **extra)
        return out

    def run(
        self,
        puzzle: Puzzle,
        limit: int = 1,
        deadline: float | None = None,
        rng: np.random.Generator | None = None,
        max_nodes: int = 0,
        stop: np.ndarray | None = None,
    ) -> ExactOutcome:
        """Solve one puzzle: the tdoku-style signature (puzzle, limit -> solutions, counters). `deadline` is
        a `time.monotonic()` time; `rng` randomises the branching order (one draw seeds the kernel)."""
        seed = int(rng.integers(1, 2**62)) if rng is not None else 0
        dl = 0 if deadline is None else int(deadline * 1e9)
        t0 = time.perf_counter()
        out = self.solve_batch(
            puzzle.givens[None, :],
            puzzle.box,
            limit=limit,
            keep=limit,
            max_nodes=max_nodes,
            deadline_ns=dl,
            seed=seed,
            stop=stop,
        )
        count = int(out.counts[0])
        return ExactOutcome(
            solutions=[out.solutions[0, i].copy() for i in range(min(count, out.solutions.shape[1]))],
            count=count,
            status=OUTCOME_NAMES[int(out.status[0])],
            nodes=int(out.nodes[0]),
            guesses=int(out.guesses[0]),
            elapsed=time.perf_counter() - t0,
        )


EXACT_SOLVERS: KindView[KernelSolver] = KindView(Kind.EXACT)  # the exact solvers of `solvers.registry`
DEFAULT_EXACT = "propagation"


def register(solver: KernelSolver) -> KernelSolver:
    """Add an exact solver to the registry (`solvers.registry`) under its name."""
    registry.register(solver.name, Kind.EXACT, solver, solver.summary)
    return solver
