"""The public Python API: `solve` one puzzle, `solve_many` a batch (the pipeline's path).

`solve_many` parses, solves, verifies and formats whole groups of puzzles with one call
each (vectorised numpy around one compiled kernel call), so per-puzzle Python overhead
stays a small fraction of solving time even for puzzles solved in microseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np

from solvers import registry
from solvers.exact import EXACT_SOLVERS
from solvers.exact.base import DEFAULT_EXACT, ExactBatch, KernelSolver
from solvers.kernel.outcome import BUDGET
from solvers.model.batch import read_batch
from solvers.model.parse import Lines, clash_mask, parse_puzzle
from solvers.model.puzzle import ALPHABET, Box, Notation, NotationKind, Puzzle, PuzzleError, as_box
from solvers.model.result import Results, SolveResult
from solvers.model.status import (
    END_CODE,
    END_ERROR,
    END_ERRORS,
    REJECTED_ERROR,
    STATUS_CODE,
    STOPPED_ERROR,
    Status,
)
from solvers.model.verify import verify_batch
from solvers.race.exchange import Raced
from solvers.race.portfolio import PRESETS, MemberSpec, PortfolioSpec, parse_portfolio, race
from solvers.registry import Kind

_RENDER = np.frombuffer((" " + ALPHABET).encode("ascii"), dtype=np.uint8)

# input position -> that search's stop flag, or the flag and its exchange with other processes (`Raced`)
Racing = Callable[[int], AbstractContextManager[np.ndarray | Raced]]


def solve(
    puzzle: str | Puzzle,
    *,
    box: Box | str | None = None,
    time_limit: float | None = None,
    solver: str | None = None,
    portfolio: str | None = None,
    limit: int = 1,
    seed: int = 0,
    stop: np.ndarray | None = None,
) -> SolveResult:
    """Solve one puzzle (a text in any supported notation, or a Puzzle)."""
    return solve_many(
        [puzzle], box=box, time_limit=time_limit, solver=solver, portfolio=portfolio, limit=limit,
        seed=seed, stop=stop,
    )[0]  # fmt: skip


def solve_many(
    lines: Iterable[str | Puzzle],
    *,
    box: Box | str | None = None,
    time_limit: float | None = None,
    solver: str | None = None,
    portfolio: str | None = None,
    limit: int = 1,
    seed: int = 0,
    stop: np.ndarray | None = None,
    racing: Racing | None = None,
    variant: int = 0,
    on_final: Callable[[Results, list[int]], object] | None = None,
) -> Results:
    """Solve every puzzle of `lines`; return one result per line, in the same order.

    A line that is not a puzzle gets an `invalid` result naming the reason; it never
    stops the batch. `time_limit` is per puzzle, in seconds. With `limit` > 1 the
    solutions are counted up to `limit` (`solution_count`), and `solved` means at
    least one was found. The answer is a list-like `Results` (index, slice, iterate,
    `len`, `list(results)`): rows become SolveResult objects only when read.
    `stop` (int64[1], see `solvers.kernel.stop`) is a flag another thread may raise: kernels
    and races check it between slices, and every puzzle not answered by then comes back
    `timeout`, "stopped before an answer".

    `racing` (the pipeline's fleet escalation) is entered around the search of each puzzle
    the batch's first pass (a small node budget) left unsolved, with its input position,
    and yields the stop flag of that search alone: raised when another process answered
    the puzzle (the caller raises it too when `stop` goes up), or that flag with the search's
    exchange with the other processes racing it (`solvers.race.exchange.Raced`). With it, even the plain
    exact path searches such puzzles one at a time. `variant` > 0 is a helper's search of
    a puzzle raced in another process too (`solvers.race.portfolio.race`).

    `on_final` (the pipeline publishing answers as they are found) is called with the results and the input
    positions whose results are final, as they become so: once every group's first pass is
    done, all positions but the puzzles left to race (invalid lines included), then each
    raced puzzle's position as its race ends. Every group's first pass runs before any race.
    """
    box = as_box(box)
    items = lines if isinstance(lines, (list, Lines)) else list(lines)
    exact, spec = _plan(solver, portfolio, limit)
    if spec is None and racing is not None and limit == 1:  # one exact member: searched puzzle by puzzle
        spec = PortfolioSpec(name=exact.name, members=(MemberSpec(solver=exact.name, randomised=False),))
    texts, results, groups = read_batch(items, box)
    stop = np.zeros(1, dtype=np.int64) if stop is None else stop
    races: list[_Leftovers] = []
    for (group_box, notation), indices, givens in groups.items():
        if spec is not None:  # the batch fast path with a node budget; the leftovers are raced below
            races.append(
                _first_pass(
                    spec, exact, givens, group_box, notation, indices, results, time_limit, seed, stop, box
                )
            )
            continue
        batch = exact.solve_batch(
            givens, group_box, limit=limit, keep=1, time_limit=time_limit, seed=seed, stop=stop
        )
        _collect(batch, givens, group_box, notation, indices, results, exact.name, limit, box)
    if on_final is not None:
        final = np.ones(len(texts), dtype=bool)
        for left in races:
            final[np.asarray(left.indices)[left.rows]] = False
        on_final(results, np.flatnonzero(final))
    for left in races:
        _race_left(spec, left, texts, results, time_limit, seed, stop, racing, variant, on_final)  # type: ignore[arg-type]
    return results


def _plan(solver: str | None, portfolio: str | None, limit: int) -> tuple[KernelSolver, PortfolioSpec | None]:
    """Read the names a user gave: return the exact solver of the batch path and the portfolio
    to race the puzzles it leaves (None: the plain exact path). `solver` names an exact solver
    (the plain path); `portfolio` a preset or a comma list of solvers (`solvers.registry`),
    raced unless it is one exact solver (`fast`: propagation alone) or solutions are counted
    (limit > 1). An unknown name raises ValueError listing what exists."""
    if solver:
        entry = registry.find(solver, PRESETS)
        if entry.kind is not Kind.EXACT:
            raise ValueError(
                f"solver {solver!r} is {entry.kind}, not exact: race it with portfolio={solver!r}; "
                f"exact solvers: {', '.join(registry.names(Kind.EXACT))}"
            )
        return entry.solver, None
    spec = parse_portfolio(portfolio)
    exact = spec.exact_solver or EXACT_SOLVERS[DEFAULT_EXACT]
    alone = len(spec.members) == 1 and spec.members[0].kind is Kind.EXACT
    return exact, None if alone or limit > 1 else spec


@dataclass
class _Leftovers:
    """A group's puzzles its first pass left to race: rows `rows` of the group, with what they spent."""

    box: Box
    notation: Notation
    indices: np.ndarray
    givens: np.ndarray
    rows: list[int]
    spent: np.ndarray  # seconds, per row of the group
    nodes: np.ndarray


def _first_pass(
    spec: PortfolioSpec,
    exact: KernelSolver,
    givens: np.ndarray,
    box: Box,
    notation: Notation,
    indices: np.ndarray,
    results: Results,
    time_limit: float | None,
    seed: int,
    stop: np.ndarray,
    user_box: Box | None,
) -> _Leftovers:
    """A group's first pass through a portfolio: one batch kernel call with the fast path's node budget
    (easy puzzles cost what the plain exact solver costs); the puzzles it leaves, to race. The fast path
    takes the seed as the plain path does (value order randomised), so another seed finds another
    solution of a puzzle with several, whatever the portfolio. A puzzle with clashing givens is
    answered `invalid`, never raced."""
    k = len(indices)
    if spec.exact_solver is None:  # stochastic only: nothing to run the fast path
        invalid = _invalid(np.arange(k), givens, box, indices, results, user_box)
        left = np.flatnonzero(~invalid).tolist()
        return _Leftovers(box, notation, indices, givens, left, np.zeros(k), np.zeros(k, np.int64))
    budget = spec.fast_budget(box.n)
    batch = exact.solve_batch(
        givens, box, limit=1, keep=1, max_nodes=budget, time_limit=time_limit, seed=seed, stop=stop
    )
    invalid = _collect(batch, givens, box, notation, indices, results, exact.name, 1, user_box)
    left = np.flatnonzero((batch.status == BUDGET) & ~invalid).tolist()
    return _Leftovers(box, notation, indices, givens, left, batch.ns / 1e9, batch.nodes)


def _race_left(
    spec: PortfolioSpec,
    left: _Leftovers,
    texts: list[str],
    results: Results,
    time_limit: float | None,
    seed: int,
    stop: np.ndarray,
    racing: Racing | None,
    variant: int,
    on_final: Callable[[Results, list[int]], object] | None,
) -> None:
    """Race each puzzle a first pass left, one by one, with the rest of its time limit (none once `stop`
    is raised), inside `racing` when given (its flag stops that race alone)."""
    for k in left.rows:
        i = int(left.indices[k])
        spent = float(left.spent[k])
        if stop[0] != 0:
            results.put(i, SolveResult(Status.TIMEOUT, texts[i], error=STOPPED_ERROR, elapsed=spent))
        else:
            with racing(i) if racing is not None else nullcontext(stop) as link:
                flag, exchange = (link, None) if isinstance(link, np.ndarray) else link
                raced = race(
                    Puzzle(left.box, left.givens[k], left.notation),
                    spec,
                    time_limit=None if time_limit is None else max(1e-3, time_limit - spent),
                    seed=seed,
                    text=texts[i],
                    fast_nodes_done=int(left.nodes[k]),
                    spent=spent,
                    stop=flag,
                    variant=variant,
                    exchange=exchange,
                )
            results.put(i, raced)
        if on_final is not None:
            on_final(results, [i])


def _collect(
    batch: ExactBatch,
    givens: np.ndarray,
    box: Box,
    notation: Notation,
    indices: np.ndarray,
    results: Results,
    solver: str,
    limit: int,
    user_box: Box | None,
) -> np.ndarray:
    """Write a kernel's output arrays into `results`' columns; the verifier has the last word. Rows that
    end without a verified grid are checked for clashing givens (those are `invalid`, with the reason):
    -> bool[k], the rows found invalid."""
    first = batch.solutions[:, 0, :]
    found = batch.counts > 0
    if found.all():
        verified = verify_batch(givens, first, box.rows, box.cols)
    else:
        verified = np.zeros(len(indices), dtype=bool)
        if found.any():
            verified[found] = verify_batch(givens[found], first[found], box.rows, box.cols)
    rendered = _render_rows(first, box, notation, verified)
    status = batch.status.astype(np.int64)
    codes = END_CODE[status]  # the status table (`solvers.model.status.ENDS`), by kernel outcome
    errors = END_ERROR[status]
    codes[verified] = STATUS_CODE[Status.SOLVED]
    errors[verified] = 0
    rejected = found & ~verified
    codes[rejected] = STATUS_CODE[Status.ERROR]
    errors[rejected] = 1
    error_texts = [REJECTED_ERROR.format(solver=solver), *END_ERRORS]
    counts = batch.counts if limit > 1 else None
    results.fill(
        indices, codes, solver, rendered, errors, error_texts, batch.ns, batch.nodes, batch.guesses, counts
    )
    if verified.all():
        return ~verified
    return _invalid(np.flatnonzero(~verified), givens, box, indices, results, user_box)


def _invalid(
    rows: np.ndarray,
    givens: np.ndarray,
    box: Box,
    indices: np.ndarray,
    results: Results,
    user_box: Box | None,
) -> np.ndarray:
    """Answer `invalid` (with the parser's reason) the rows among `rows` of a group whose givens clash:
    -> bool[len(givens)], the rows so answered. Parsing reads symbols only: this is where a clash is found."""
    out = np.zeros(len(givens), dtype=bool)
    if not len(rows):
        return out
    for k in rows[clash_mask(givens[rows], box)].tolist():
        i = int(indices[k])
        text = results.texts[i]
        try:
            parse_puzzle(text, user_box)
        except PuzzleError as exc:
            results.put(i, SolveResult(Status.INVALID, text, error=str(exc)))
            out[k] = True
    return out


def _render_rows(
    grids: np.ndarray, box: Box, notation: Notation, mask: np.ndarray
) -> list[str | None] | tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Each grid where `mask` holds in `notation`: for compact notation the block of values with the mask
    and the table of their symbols (None: "1".."9"; symbols and texts are made only when read), else
    as texts."""
    if notation.kind is NotationKind.COMPACT and box.n <= len(ALPHABET):
        return grids, mask, None if box.n <= 9 else _RENDER
    out: list[str | None] = [None] * grids.shape[0]
    for row in np.flatnonzero(mask).tolist():
        out[row] = notation.render(grids[row], box)
    return out


__all__ = ["solve", "solve_many"]
