"""A chunk's results as columns: the arrays a worker sends, the collector decodes, and every renderer reads.

One type, `ResultColumns`, from the solver's `Results` to the output file: its number arrays are the ones
`Results` fills (`Numbers`: no SolveResult per row, no copy), and the wire (`pipeline.contract.wire`)
follows `COLUMNS`. Texts are one UTF-8 buffer with offsets (`Texts`), numbers integers (times in ns, ms
only in a rendered record, by one rule), so every renderer prints the same digits; status codes are
explicit (`solvers.model.status`), so reordering the `Status` enum cannot change the wire. Adding a field:
docs/architecture.md, "Adding a field".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from solvers.fields import COUNTER_DECIMALS, RESULT_ORDER, TIME_DECIMALS
from solvers.model.frame import ms_fixed, plain, quantise, seconds_ns, simple_counters
from solvers.model.status import IS_ANSWERED, IS_PROBLEM, STATUS_CODE, STATUS_NAMES, Status
from solvers.model.texts import Texts

TIME_BINS_PER_DECADE = 50  # time histogram resolution: bins 4.7% wide
COUNTERS_SIMPLE, COUNTERS_RAW = 1, 2  # (0: {}); {solver: {nodes, guesses, time_ms}}; raw JSON


@dataclass(frozen=True)
class Column:
    """One array of `ResultColumns` and its name on the wire."""

    name: str  # attribute of ResultColumns
    wire: str  # part name in the wire layout (texts: `<wire>_buf` and `<wire>_len`)
    kind: str  # "text", "int" or "bool"
    dtype: Any = None  # int columns: the dtype the renderers read
    default: int = 0  # int and bool columns: the value of rows a payload without this part holds
    required: bool = True  # False for a column added later: payloads of older workers lack it


COLUMNS = (
    Column("puzzle", "p", "text"),
    Column("solution", "sol", "text"),  # an empty text: no solution (null)
    Column("error", "e", "text"),  # empty: null
    Column("counters_raw", "c", "text"),  # the JSON of COUNTERS_RAW rows
    Column("status", "status", "int", np.uint8),  # STATUS_CODE
    Column("cost", "cost", "int", np.int64),
    Column("solver", "solver", "int", np.int16, -1),  # id into `names`, -1: none
    Column("time_ns", "time_ns", "int", np.int64),  # solving time in ns (`time_ms`, SolveResult.elapsed)
    Column("nodes", "nodes", "int", np.int64),
    Column("guesses", "guesses", "int", np.int64),
    Column("restarts", "restarts", "int", np.int64),
    Column("counter_kind", "c_kind", "int", np.uint8),  # COUNTERS_*
    Column("counter_solver", "c_name", "int", np.int16, -1),  # id into `names` of COUNTERS_SIMPLE rows
    Column("counter_nodes", "c_nodes", "int", np.int64),
    Column("counter_guesses", "c_guesses", "int", np.int64),
    Column("counter_time_ns", "c_time_ns", "int", np.int64),  # the member's time_ms in ns
    Column("has_cost", "has_cost", "bool"),
    Column("time_ok", "time_ok", "bool"),  # the time is finite (else null)
)


NUMBERS = tuple(c for c in COLUMNS if c.kind != "text")


@dataclass
class Numbers:
    """A chunk's number columns, an array each, a row per puzzle: what `Results` holds and fills, and
    `ResultColumns` carries (the same arrays: building the columns of a `Results` copies no number)."""

    status: np.ndarray
    cost: np.ndarray
    has_cost: np.ndarray
    solver: np.ndarray
    time_ns: np.ndarray
    time_ok: np.ndarray
    nodes: np.ndarray
    guesses: np.ndarray
    restarts: np.ndarray
    counter_kind: np.ndarray
    counter_solver: np.ndarray
    counter_nodes: np.ndarray
    counter_guesses: np.ndarray
    counter_time_ns: np.ndarray

    def numbers(self) -> dict[str, np.ndarray]:
        """The number columns by name (the arrays themselves)."""
        return {c.name: getattr(self, c.name) for c in NUMBERS}


# a batch row's counters are its own solver's figures: one array for both
BATCH_COUNTERS = {
    "counter_solver": "solver",
    "counter_nodes": "nodes",
    "counter_guesses": "guesses",
    "counter_time_ns": "time_ns",
}


def batch_numbers(n: int) -> Numbers:
    """n unset rows of a batch (no solver, no counters; zeros untouched until written), the simple counters'
    columns the same arrays as their solver's (`BATCH_COUNTERS`): no memory twice, nothing copied."""
    own = [c for c in NUMBERS if c.name not in BATCH_COUNTERS]
    new = {c.name: np.full(n, c.default, c.dtype) if c.default else np.zeros(n, c.dtype or bool) for c in own}
    return Numbers(**new, **{name: new[same] for name, same in BATCH_COUNTERS.items()})


@dataclass
class ResultColumns(Numbers):
    """One chunk's results, a row per puzzle: the arrays that travel and the renderers read (`COLUMNS`)."""

    names: list[str]  # solver names the ids index
    puzzle: Texts
    solution: Texts
    error: Texts
    counters_raw: Texts

    def __len__(self) -> int:
        return int(self.status.shape[0])

    def slice(self, start: int, stop: int) -> ResultColumns:
        """Rows `start:stop` (views: no copy); the whole columns when that is all of them."""
        if start == 0 and stop == len(self):
            return self
        return self._cut(lambda t: t.slice(start, stop), lambda a: a[start:stop])

    def take(self, rows: np.ndarray) -> ResultColumns:
        """Rows `rows` (increasing positions): a view when they are one run, else a copy."""
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows) or int(rows[-1]) - int(rows[0]) + 1 == len(rows):
            start = int(rows[0]) if len(rows) else 0
            return self.slice(start, start + len(rows))
        return self._cut(lambda t: t.take(rows), lambda a: a[rows])

    def _cut(self, texts: Any, arrays: Any) -> ResultColumns:
        """The same rows of every column: `texts` cuts a text column, `arrays` any other."""
        cut = {c.name: (texts if c.kind == "text" else arrays)(getattr(self, c.name)) for c in COLUMNS}
        return ResultColumns(names=self.names, **cut)

    @classmethod
    def build(cls, texts: Sequence[str], results: Sequence[Any]) -> ResultColumns:
        """The columns of `results` (SolveResults, aligned with the puzzle `texts`); a `solved` without cost
        0 and a grid is demoted to `error`. A `Results` hands over its own arrays (`Results.columns`)."""
        own = getattr(results, "columns", None)
        return own(texts) if own is not None else _from_objects(texts, results)

    def overlay(self, rows: list[int], sub: ResultColumns) -> ResultColumns:
        """A copy of these columns with `sub` (the rows `rows`) written over those rows, solver names
        merged: how the rows of a `Results` held as objects take their place (its arrays stay as they are)."""
        names = [*self.names, *(n for n in sub.names if n not in self.names)]
        remap = np.array([names.index(n) for n in sub.names] + [-1], dtype=np.int16)  # -1 stays -1
        at = np.asarray(rows, dtype=np.int64)
        numbers = {name: a.copy() for name, a in self.numbers().items()}
        for name, a in numbers.items():
            a[at] = getattr(sub, name)
        numbers["solver"][at] = remap[sub.solver]
        numbers["counter_solver"][at] = remap[sub.counter_solver]
        texts = {name: _patched(getattr(self, name), rows, getattr(sub, name)) for name in _OVERLAID}
        return ResultColumns(names=names, puzzle=self.puzzle, **texts, **numbers)

    def check(self) -> None:
        """Refuse (ValueError) codes and ids the renderers would read out of their tables."""
        n = len(self.names)
        if self.status.size and int(self.status.max()) >= len(STATUS_NAMES):
            raise ValueError("unknown status code")
        if self.solver.size and (int(self.solver.min()) < -1 or int(self.solver.max()) >= n):
            raise ValueError("solver id out of range")
        if self.counter_kind.size and int(self.counter_kind.max()) > COUNTERS_RAW:
            raise ValueError("unknown counters kind")
        simple = self.counter_solver[self.counter_kind == COUNTERS_SIMPLE]
        if simple.size and (int(simple.min()) < 0 or int(simple.max()) >= n):
            raise ValueError("counters name id out of range")
        raw = self.counters_raw.buf
        if raw.size and int(raw.min()) < 32:  # raw JSON is copied as it is: one line a row
            raise ValueError("a control byte in raw counters")

    def tally(self) -> Tally:
        """Count statuses, wins, approximate costs and the log-binned times (vectorised)."""
        codes = self.status
        counts = np.bincount(codes, minlength=len(STATUS_NAMES))
        answered = IS_ANSWERED[codes] & (self.solver >= 0)
        wins = np.bincount(self.solver[answered].astype(np.int64), minlength=len(self.names))
        approx = (codes == STATUS_CODE[Status.APPROXIMATE]) & self.has_cost
        cost_values, cost_counts = np.unique(self.cost[approx], return_counts=True)
        timed = self.time_ok & (codes != STATUS_CODE[Status.INVALID])
        ms = ms_fixed(self.time_ns[timed], TIME_DECIMALS) / 10.0**TIME_DECIMALS  # as the records print it
        bins = np.floor(TIME_BINS_PER_DECADE * np.log10(np.maximum(ms, 1e-4))).astype(np.int64)
        low = int(bins.min()) if bins.size else 0
        per_bin = np.bincount(bins - low)  # a few hundred bins at most: counting beats sorting
        filled = np.flatnonzero(per_bin)
        return Tally(
            counts={STATUS_NAMES[i]: int(c) for i, c in enumerate(counts) if c},
            wins={self.names[i]: int(c) for i, c in enumerate(wins) if c},
            approx_costs={int(v): int(c) for v, c in zip(cost_values, cost_counts, strict=True)},
            time_bins=dict(zip((filled + low).tolist(), per_bin[filled].tolist(), strict=True)),
            time_max_ms=float(ms.max()) if ms.size else 0.0,
            solve_s=float(ms.sum()) / 1000.0,
            problem_rows=np.flatnonzero(IS_PROBLEM[codes]).tolist(),
        )


@dataclass
class Tally:
    """What the summary needs from a chunk."""

    counts: dict[str, int]
    wins: dict[str, int]
    approx_costs: dict[int, int]
    time_bins: dict[int, int]
    time_max_ms: float
    solve_s: float
    problem_rows: list[int]


_OVERLAID = ("solution", "error", "counters_raw")  # the text columns a row's object replaces


def _patched(base: Texts, rows: list[int], sub: Texts) -> Texts:
    """`base` with its rows `rows` replaced by `sub`'s texts."""
    if not base.buf.size and not sub.buf.size:
        return base
    texts = base.to_list()
    for i, text in zip(rows, sub.to_list(), strict=True):
        texts[i] = text
    return Texts.of(texts)


def puzzle_texts(texts: Sequence[str]) -> Texts:
    """The puzzle column: a `solvers.model.parse.Lines` read at once hands over its bytes as they are."""
    symbols = getattr(texts, "symbols", None)
    return Texts.of_block(symbols) if symbols is not None else Texts.of(texts)


_GETTERS = [attrgetter(name) for name in RESULT_ORDER if name not in ("puzzle", "solution_count")]
_SIMPLE_GET = [itemgetter(k) for k in ("nodes", "guesses", "time_ms")]


def _from_objects(texts: Sequence[str], results: Sequence[Any]) -> ResultColumns:
    """The columns of SolveResult objects, one C-level pass per attribute."""
    b = len(results)
    status, solution, cost, solver, elapsed, nodes, guesses, restarts, errors, counters = [
        list(map(get, results)) for get in _GETTERS
    ]
    codes = np.fromiter(map(STATUS_CODE.__getitem__, status), np.uint8, b)
    has_cost = np.fromiter((c is not None for c in cost), bool, b)
    costs = np.array([0 if c is None else c for c in cost], dtype=np.int64).reshape(b)
    solutions = solution if solution.count(None) == 0 else [s or "" for s in solution]
    has_grid = np.fromiter(map(bool, solutions), bool, b)
    bad = np.flatnonzero((codes == STATUS_CODE[Status.SOLVED]) & (~has_cost | (costs != 0) | ~has_grid))
    for i in bad.tolist():
        codes[i], has_cost[i], costs[i] = STATUS_CODE[Status.ERROR], False, 0
        errors[i] = f"{solver[i]} reported solved with cost {cost[i]} and no valid grid"
        solutions[i] = ""
    names = [n for n in dict.fromkeys(solver) if n is not None]
    ids: dict[str | None, int] = {n: i for i, n in enumerate(names)}
    ids[None] = -1
    time_ns, time_ok = seconds_ns(np.array(elapsed, dtype=np.float64).reshape(b))
    numbers = Numbers(
        status=codes,
        cost=costs,
        has_cost=has_cost,
        solver=np.fromiter(map(ids.__getitem__, solver), np.int16, b),
        time_ns=time_ns,
        time_ok=time_ok,
        nodes=np.array(nodes, dtype=np.int64).reshape(b),
        guesses=np.array(guesses, dtype=np.int64).reshape(b),
        restarts=np.array(restarts, dtype=np.int64).reshape(b),
        **{c.name: np.full(b, c.default, c.dtype) for c in NUMBERS if c.name.startswith("counter_")},
    )
    raw = _counters(numbers, names, counters, solver, ids)
    return ResultColumns(
        names=names,
        puzzle=puzzle_texts(texts),
        solution=Texts.of(solutions),
        error=Texts.of([e or "" for e in errors]),
        counters_raw=Texts.of(raw),
        **numbers.numbers(),
    )


def _counters(rows: Numbers, names: list[str], counters: list[dict], solver: list, ids: dict) -> list[str]:
    """Fill the counter columns: vectorised when every row is simple, row by row otherwise; return the raw
    counters' JSON texts ("" where a row has none)."""
    b = len(counters)
    if b and None not in solver and list(map(len, counters)).count(1) == b:
        inner = list(map(dict.get, counters, solver))
        if None not in inner and list(map(len, inner)).count(3) == b:
            try:
                values = [np.fromiter(map(get, inner), np.float64, b) for get in _SIMPLE_GET]
            except (KeyError, TypeError, ValueError):
                values = []
            if values:
                q, ok = quantise(values[2], COUNTER_DECIMALS)
                if ok.all():
                    rows.counter_kind[:] = COUNTERS_SIMPLE
                    rows.counter_solver[:] = rows.solver
                    rows.counter_nodes[:] = values[0]
                    rows.counter_guesses[:] = values[1]
                    rows.counter_time_ns[:] = q
                    return [""] * b
    raw = [""] * b
    for i, c in enumerate(counters):
        if not c:
            continue
        simple = simple_counters(c)
        if simple is None:
            rows.counter_kind[i] = COUNTERS_RAW
            raw[i] = json.dumps(c, separators=(",", ":"), default=plain, allow_nan=False)
            continue
        name, n, g, t = simple
        if name not in ids:
            ids[name] = len(names)
            names.append(name)
        rows.counter_kind[i], rows.counter_solver[i] = COUNTERS_SIMPLE, ids[name]
        rows.counter_nodes[i], rows.counter_guesses[i], rows.counter_time_ns[i] = n, g, t
    return raw
