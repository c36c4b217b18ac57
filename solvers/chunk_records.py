"""Render a chunk's SolveResults as JSON Lines records, and tally them for the summary.

The record fields are a public interface (`line`, `input`, `index`, `puzzle`, `status`,
`solution`, `cost`, `solver`, `time_ms`, `error`, `nodes`, `guesses`, `restarts`,
`counters`). Rendering runs once per puzzle on the pipeline's hot path: in Python it
would cost a third of the solving time of an easy puzzle, so the results are first
pulled into columns with C-level maps, then a compiled kernel (`chunk_render`) writes
the bytes. `render_py` is the plain-Python twin (for the producer, which must not load
numba, and as the reference the kernel is tested against).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from solvers.result import SolveResult, Status
from solvers.results import Results, symbol_texts

TIME_BINS_PER_DECADE = 50  # time histogram resolution: bins 4.7% wide
TIME_DECIMALS = 4  # `time_ms` is written to 0.1 µs
COUNTER_DECIMALS = 6  # counter times (ms) are written to 1 ns
FIELDS = (
    "line", "input", "index", "puzzle", "status", "solution", "cost",
    "solver", "time_ms", "error", "nodes", "guesses", "restarts", "counters",
)  # fmt: skip
STATUS_NAMES = [s.value for s in Status]
STATUS_CODE = {s: i for i, s in enumerate(Status)}
_ATTRS = (
    "status",
    "solution",
    "cost",
    "solver",
    "elapsed",
    "error",
    "nodes",
    "guesses",
    "restarts",
    "counters",
)
_GETTERS = [attrgetter(name) for name in _ATTRS]
_SIMPLE = ("nodes", "guesses", "time_ms")
_SIMPLE_GET = [itemgetter(k) for k in _SIMPLE]
ANSWERED = (STATUS_CODE[Status.SOLVED], STATUS_CODE[Status.APPROXIMATE])
PROBLEMS = (STATUS_CODE[Status.INVALID], STATUS_CODE[Status.ERROR])


@dataclass
class Columns:
    """A chunk's results as arrays and lists aligned by row (what the renderers read)."""

    status: np.ndarray  # uint8 codes into STATUS_NAMES
    solver: np.ndarray  # int16 ids into `names`, -1 for none
    names: list[str]
    cost: np.ndarray  # float64, NaN for none
    time_q: np.ndarray  # int64: time_ms * 10**TIME_DECIMALS, rounded
    time_ok: np.ndarray  # bool: the time is finite (else null)
    nodes: np.ndarray  # int64
    guesses: np.ndarray
    restarts: np.ndarray
    solutions: list[str] | None  # "" for none; None while they are only in `symbols`
    errors: list[str | None]
    counter_kind: np.ndarray  # uint8: 0 empty, 1 {solver: {nodes, guesses, time_ms}}, 2 other (raw JSON)
    counter_name: np.ndarray  # int16 id into `names` of the simple counters' solver
    counter_nodes: np.ndarray
    counter_guesses: np.ndarray
    counter_time_q: np.ndarray  # time_ms * 10**COUNTER_DECIMALS, rounded
    counter_raw: list[str]  # JSON of kind-2 counters, "" elsewhere
    symbols: tuple[np.ndarray, np.ndarray] | None = None  # (ASCII u8[B, NN], has one bool[B]), or None

    def solution_texts(self) -> list[str]:
        """Every row's solution text ("" for none), cut from `symbols` on first use."""
        if self.solutions is None:
            self.solutions = [t or "" for t in symbol_texts(*self.symbols)] if self.symbols else []
            self.symbols = None
        return self.solutions


def _plain(value: Any) -> Any:
    """Make numpy scalars JSON-serialisable."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _quantise(values: np.ndarray, decimals: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (round(values * 10**decimals) as int64, finite mask); both renderers print these."""
    finite = np.isfinite(values) & (np.abs(values) < 1e12)
    q = np.rint(np.where(finite, values, 0.0) * 10.0**decimals).astype(np.int64)
    return q, finite


def extract(results: Sequence[SolveResult]) -> Columns:
    """Pull results into Columns, demoting a `solved` without cost 0 and a grid to `error`.

    A `Results` (what `solve_many` returns) hands over its columns without building a
    SolveResult per row; only its rows held as objects go through `_extract_objects`.
    """
    if isinstance(results, Results):
        return _extract_columns(results)
    return _extract_objects(results)


def _extract_columns(results: Results) -> Columns:
    """Columns of a Results: its arrays as they are, then its object rows laid over them."""
    b = len(results)
    ns = results.ns.astype(np.float64)
    time_q, time_ok = _quantise(ns / 1e9 * 1000.0, TIME_DECIMALS)  # as `elapsed` (s) -> ms
    counter_q, _ = _quantise(ns / 1e6, COUNTER_DECIMALS)
    has_solver = results.solver >= 0
    errors = results.error_texts
    cols = Columns(
        status=results.code.copy(),
        solver=results.solver.copy(),
        names=list(results.names),
        cost=np.where(results.solved_cost, 0.0, np.nan),
        time_q=time_q,
        time_ok=time_ok,
        nodes=results.nodes.copy(),
        guesses=results.guesses.copy(),
        restarts=np.zeros(b, np.int64),
        solutions=None if results.symbols is not None else [s or "" for s in results.solutions],
        symbols=results.symbols,
        errors=list(map(errors.__getitem__, results.error_id.tolist())),
        counter_kind=has_solver.astype(np.uint8),
        counter_name=results.solver.copy(),
        counter_nodes=np.where(has_solver, results.nodes, 0),
        counter_guesses=np.where(has_solver, results.guesses, 0),
        counter_time_q=np.where(has_solver, counter_q, 0),
        counter_raw=[""] * b,
    )
    rows = results.born_rows()
    if rows:
        _overlay(cols, rows, _extract_objects([results[i] for i in rows]))
    return cols


def _overlay(cols: Columns, rows: list[int], sub: Columns) -> None:
    """Write `sub` (the Columns of `rows`) over those rows of `cols`, merging solver names."""
    for name in sub.names:
        if name not in cols.names:
            cols.names.append(name)
    remap = np.array([cols.names.index(n) for n in sub.names] + [-1], dtype=np.int16)  # -1 stays -1
    at = np.asarray(rows, dtype=np.int64)
    for field in ("status", "cost", "time_q", "time_ok", "nodes", "guesses", "restarts", "counter_kind"):
        getattr(cols, field)[at] = getattr(sub, field)
    for field in ("counter_nodes", "counter_guesses", "counter_time_q"):
        getattr(cols, field)[at] = getattr(sub, field)
    cols.solver[at] = remap[sub.solver]
    cols.counter_name[at] = remap[sub.counter_name]
    cols.solutions = list(cols.solution_texts())  # never write into the Results' own list
    for k, i in enumerate(rows):
        cols.solutions[i] = sub.solutions[k]
        cols.errors[i] = sub.errors[k]
        cols.counter_raw[i] = sub.counter_raw[k]


def _extract_objects(results: Sequence[SolveResult]) -> Columns:
    """Columns of SolveResult objects, one C-level pass per attribute."""
    b = len(results)
    columns = [list(map(get, results)) for get in _GETTERS]  # one C-level pass per attribute
    status, solution, cost, solver, elapsed, error, nodes, guesses, restarts, counters = columns
    codes = np.fromiter(map(STATUS_CODE.__getitem__, status), np.uint8, b)
    costs = np.array(cost, dtype=np.float64).reshape(b)
    solutions = solution if solution.count(None) == 0 else [s or "" for s in solution]
    errors = error
    has_grid = np.fromiter(map(bool, solutions), bool, b)
    bad = np.flatnonzero((codes == STATUS_CODE[Status.SOLVED]) & ((costs != 0) | ~has_grid))
    for i in bad.tolist():
        codes[i], costs[i] = STATUS_CODE[Status.ERROR], np.nan
        errors[i] = f"{solver[i]} reported solved with cost {cost[i]} and no valid grid"
        solutions[i] = ""
    names = [n for n in dict.fromkeys(solver) if n is not None]
    ids: dict[str | None, int] = {n: i for i, n in enumerate(names)}
    ids[None] = -1
    time_q, time_ok = _quantise(np.array(elapsed, dtype=np.float64).reshape(b) * 1000.0, TIME_DECIMALS)
    cols = Columns(
        status=codes,
        solver=np.fromiter(map(ids.__getitem__, solver), np.int16, b),
        names=names,
        cost=costs,
        time_q=time_q,
        time_ok=time_ok,
        nodes=np.array(nodes, dtype=np.int64).reshape(b),
        guesses=np.array(guesses, dtype=np.int64).reshape(b),
        restarts=np.array(restarts, dtype=np.int64).reshape(b),
        solutions=solutions,
        errors=errors,
        counter_kind=np.zeros(b, np.uint8),
        counter_name=np.full(b, -1, np.int16),
        counter_nodes=np.zeros(b, np.int64),
        counter_guesses=np.zeros(b, np.int64),
        counter_time_q=np.zeros(b, np.int64),
        counter_raw=[""] * b,
    )
    _extract_counters(cols, counters, solver, ids)
    return cols


def _extract_counters(cols: Columns, counters: list[dict], solver: list[str | None], ids: dict) -> None:
    """Fill the counter columns: vectorised when every row is simple, row by row otherwise."""
    b = len(counters)
    if b and None not in solver and list(map(len, counters)).count(1) == b:
        inner = list(map(dict.get, counters, solver))
        if None not in inner and list(map(len, inner)).count(3) == b:
            try:
                values = [np.fromiter(map(get, inner), np.float64, b) for get in _SIMPLE_GET]
            except (KeyError, TypeError, ValueError):
                values = []
            if values:
                q, ok = _quantise(values[2], COUNTER_DECIMALS)
                if ok.all():
                    cols.counter_kind[:] = 1
                    cols.counter_name[:] = cols.solver
                    cols.counter_nodes[:] = values[0]
                    cols.counter_guesses[:] = values[1]
                    cols.counter_time_q[:] = q
                    return
    for i, c in enumerate(counters):
        if not c:
            continue
        simple = _simple(c)
        if simple is None:
            cols.counter_kind[i] = 2
            cols.counter_raw[i] = json.dumps(c, separators=(",", ":"), default=_plain, allow_nan=False)
            continue
        name, n, g, t = simple
        if name not in ids:
            ids[name] = len(cols.names)
            cols.names.append(name)
        cols.counter_kind[i], cols.counter_name[i] = 1, ids[name]
        cols.counter_nodes[i], cols.counter_guesses[i], cols.counter_time_q[i] = n, g, t


def _simple(counters: dict) -> tuple[str, int, int, int] | None:
    """Return (solver, nodes, guesses, time_q) when counters are one solver's three counters."""
    if len(counters) != 1:
        return None
    ((name, d),) = counters.items()
    if not isinstance(d, dict) or len(d) != 3 or not all(k in d for k in _SIMPLE):
        return None
    try:
        n, g, t = int(d["nodes"]), int(d["guesses"]), float(d["time_ms"])
    except (TypeError, ValueError):
        return None
    q, ok = _quantise(np.array([t]), COUNTER_DECIMALS)
    if not ok[0] or n != d["nodes"] or g != d["guesses"]:
        return None
    return str(name), n, g, int(q[0])


def fixed(q: int, decimals: int) -> str:
    """Write q / 10**decimals with trailing zeros dropped but one decimal kept (`12.0`, `0.0219`)."""
    sign = "-" if q < 0 else ""
    whole, frac = divmod(abs(q), 10**decimals)
    digits = f"{frac:0{decimals}d}".rstrip("0") or "0"
    return f"{sign}{whole}.{digits}"


def render_py(
    input_name: str, indices: list[int], lines: list[int], texts: list[str], cols: Columns
) -> bytes:
    """Render Columns as JSON Lines in plain Python (same bytes as the compiled kernel)."""
    inp = encode_basestring(input_name)
    names = [encode_basestring(n) for n in cols.names]
    solutions = cols.solution_texts()
    out = []
    for i in range(len(texts)):
        solver = int(cols.solver[i])
        cost = cols.cost[i]
        kind = int(cols.counter_kind[i])
        if kind == 1:
            counters = (
                f'{{{names[int(cols.counter_name[i])]}:{{"nodes":{int(cols.counter_nodes[i])},'
                f'"guesses":{int(cols.counter_guesses[i])},'
                f'"time_ms":{fixed(int(cols.counter_time_q[i]), COUNTER_DECIMALS)}}}}}'
            )
        else:
            counters = cols.counter_raw[i] if kind == 2 else "{}"
        error = cols.errors[i]
        out.append(
            f'{{"line":{lines[i]},"input":{inp},"index":{indices[i]},"puzzle":{encode_basestring(texts[i])},'
            f'"status":"{STATUS_NAMES[int(cols.status[i])]}",'
            f'"solution":{encode_basestring(solutions[i]) if solutions[i] else "null"},'
            f'"cost":{"null" if np.isnan(cost) else int(cost)},'
            f'"solver":{"null" if solver < 0 else names[solver]},'
            f'"time_ms":{fixed(int(cols.time_q[i]), TIME_DECIMALS) if cols.time_ok[i] else "null"},'
            f'"error":{encode_basestring(str(error)) if error else "null"},'
            f'"nodes":{int(cols.nodes[i])},"guesses":{int(cols.guesses[i])},"restarts":{int(cols.restarts[i])},'
            f'"counters":{counters}}}'
        )
    return "\n".join(out).encode()


def render(input_name: str, indices: list[int], lines: list[int], texts: list[str], cols: Columns) -> bytes:
    """Render Columns as JSON Lines with the compiled kernel (loads numba)."""
    from solvers.chunk_render import render_packed
    from solvers.chunk_wire import pack

    index, line = np.asarray(indices, np.int64), np.asarray(lines, np.int64)
    return render_packed(input_name, index, line, pack(texts, cols))


@dataclass
class Tally:
    """What the summary needs from a chunk (computed from Columns, vectorised)."""

    counts: dict[str, int]
    wins: dict[str, int]
    approx_costs: dict[int, int]
    time_bins: dict[int, int]
    time_max_ms: float
    solve_s: float
    problem_rows: list[int]


def tally(cols: Columns) -> Tally:
    """Count statuses, wins, approximate costs and the log-binned times of a chunk."""
    codes = cols.status
    counts = np.bincount(codes, minlength=len(STATUS_NAMES))
    answered = np.isin(codes, ANSWERED) & (cols.solver >= 0)
    wins = np.bincount(cols.solver[answered].astype(np.int64), minlength=len(cols.names))
    approx = (codes == STATUS_CODE[Status.APPROXIMATE]) & ~np.isnan(cols.cost)
    cost_values, cost_counts = np.unique(cols.cost[approx].astype(np.int64), return_counts=True)
    timed = cols.time_ok & (codes != STATUS_CODE[Status.INVALID])
    ms = cols.time_q[timed] / 10.0**TIME_DECIMALS
    bins = np.floor(TIME_BINS_PER_DECADE * np.log10(np.maximum(ms, 1e-4))).astype(np.int64)
    bin_values, bin_counts = np.unique(bins, return_counts=True)
    return Tally(
        counts={STATUS_NAMES[i]: int(c) for i, c in enumerate(counts) if c},
        wins={cols.names[i]: int(c) for i, c in enumerate(wins) if c},
        approx_costs={int(v): int(c) for v, c in zip(cost_values, cost_counts, strict=True)},
        time_bins={int(v): int(c) for v, c in zip(bin_values, bin_counts, strict=True)},
        time_max_ms=float(ms.max()) if ms.size else 0.0,
        solve_s=float(ms.sum()) / 1000.0,
        problem_rows=np.flatnonzero(np.isin(codes, PROBLEMS)).tolist(),
    )
