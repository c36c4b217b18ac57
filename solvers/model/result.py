"""What a solve returns: `SolveResult` (a status from a closed set, the grid in the input's notation, its
cost, the winning solver and its counters), and `Results`, what `solve_many` returns.

Why `Results` holds columns: an easy 9x9 puzzle is solved in 2-5 µs, and building its SolveResult costs
about as much again. So the batch path writes arrays, and a row becomes a SolveResult only when read
(then cached: edits stick); the pipeline's columns are `Results`' own arrays. Rows born as objects
(invalid lines, raced puzzles) are stored as objects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from itertools import compress, repeat
from operator import is_not
from typing import Any, overload

import numpy as np

from solvers.fields import BY_RESULT, RESULT_ORDER
from solvers.model.columns import COUNTERS_SIMPLE, ResultColumns, batch_numbers, puzzle_texts
from solvers.model.status import STATUS_BY_CODE, STATUS_CODE, Status
from solvers.model.texts import Texts, symbol_texts


def _to_dict(self: Any) -> dict[str, Any]:
    """Return a JSON-ready dict (status as its string)."""
    d = asdict(self)
    d["status"] = self.status.value
    return d


def _result_fields() -> list[tuple[str, Any, Any]]:
    """SolveResult's attributes from the field table (`solvers.fields`), in RESULT_ORDER."""
    out: list[tuple[str, Any, Any]] = []
    for name in RESULT_ORDER:
        f = BY_RESULT[name]
        if name == "status":
            out.append((name, "Status", dataclasses.field()))
        elif name == "counters":
            out.append((name, f.result_type, dataclasses.field(default_factory=dict)))
        else:
            out.append((name, f.result_type, dataclasses.field(default=f.result_default)))
    return out


# One puzzle's result. `cost` is 0 iff `solution` is a valid grid keeping every given. Built from the
# field table (`solvers.fields`): a field added there is an attribute here.
SolveResult = dataclasses.make_dataclass(
    "SolveResult",
    _result_fields(),
    namespace={
        "to_dict": _to_dict,
        "__doc__": "One puzzle's result. `cost` is 0 iff `solution` is a valid grid keeping every given "
        "(fields: `solvers.fields.FIELDS`).",
    },
    slots=True,
)
SolveResult.__module__ = __name__


class Results(Sequence[SolveResult]):
    """One SolveResult per input line, in input order (index, slice, iterate, compare to a list)."""

    __slots__ = (
        "texts",
        "numbers",
        "names",
        "counts",
        "error_id",
        "error_texts",
        "solutions",
        "_symbols",
        "_values",
        "items",
        "born",
    )

    def __init__(self, texts: list[str]) -> None:
        n = len(texts)
        self.texts = texts  # each line's puzzle text as given (stripped)
        self.numbers = batch_numbers(n)  # the arrays `ResultColumns` carries, as `fill` sets them
        self.numbers.time_ok[:] = True  # a row nobody set took no time
        self.names: list[str] = []  # solver names the ids index
        self.counts: np.ndarray | None = None  # solutions counted (limit > 1), else None
        self.error_id = np.zeros(n, np.int16)  # index into `error_texts` (0: no error)
        self.error_texts: list[str | None] = [None]
        self.solutions: list[str | None] = [None] * n  # as texts (rows not in `symbols`)
        self._symbols: tuple[np.ndarray, np.ndarray] | None = None  # (ASCII u8[n, NN], has one: bool[n])
        self._values: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None = None  # see `fill`
        self.items: list[SolveResult | None] = [None] * n  # built or born objects
        self.born = 0  # rows stored as objects by `put` (they override the columns)

    def put(self, i: int, result: SolveResult) -> None:
        """Store row `i` as an object (invalid lines and raced puzzles are born as objects)."""
        self.items[i] = result
        self.born += 1

    def fill(
        self,
        indices: Sequence[int] | np.ndarray,
        code: np.ndarray,
        solver: str,
        solutions: list[str | None] | tuple[np.ndarray, np.ndarray, np.ndarray | None],
        errors: np.ndarray,
        error_texts: list[str | None],
        ns: np.ndarray,
        nodes: np.ndarray,
        guesses: np.ndarray,
        counts: np.ndarray | None,
    ) -> None:
        """Write one kernel batch's rows (aligned with `indices`); `errors` index `error_texts`. `solutions`
        are texts, or (grid values u8[k, NN], has one bool[k], table value -> ASCII symbol or None for
        "1".."9"), kept as they are when the batch is the whole input: no string for a row nobody reads."""
        if solver not in self.names:
            self.names.append(solver)
        at = np.asarray(indices, dtype=np.int64)
        whole = len(at) == len(self.texts) and bool((at == np.arange(len(at))).all())
        rows: np.ndarray | slice = slice(None) if whole else at
        num, sid = self.numbers, self.names.index(solver)
        num.status[rows] = code
        num.has_cost[rows] = code == STATUS_CODE[Status.SOLVED]  # cost 0
        num.solver[rows], num.time_ns[rows], num.time_ok[rows] = sid, ns, True
        num.nodes[rows], num.guesses[rows] = nodes, guesses
        num.counter_kind[rows] = COUNTERS_SIMPLE  # {solver: {nodes, guesses, time_ms}}: the same arrays
        base = len(self.error_texts)
        self.error_texts.extend(error_texts)
        self.error_id[rows] = np.where(errors > 0, errors + base - 1, 0)
        if counts is not None:
            if self.counts is None:
                self.counts = np.full(len(self.texts), -1, np.int64)
            self.counts[rows] = counts
        if isinstance(solutions, tuple):
            if whole:
                self._values, self._symbols = solutions, None
                return
            solutions = symbol_texts(*_ascii(*solutions))
        if whole:
            self.solutions = solutions
            return
        for i, text in zip(at.tolist(), solutions, strict=True):
            self.solutions[i] = text

    @property
    def symbols(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(ASCII symbols u8[n, NN], has one bool[n]) when the solutions are held as a block, else None."""
        if self._values is not None:
            self._symbols, self._values = _ascii(*self._values), None
        return self._symbols

    def solution(self, i: int) -> str | None:
        """Row i's solution text, or None."""
        text = self.solutions[i]
        if text is None and self.symbols is not None and self.symbols[1][i]:
            return self.symbols[0][i].tobytes().decode("ascii")
        return text

    def __len__(self) -> int:
        return len(self.texts)

    @overload
    def __getitem__(self, i: int) -> SolveResult: ...
    @overload
    def __getitem__(self, i: slice) -> list[SolveResult]: ...
    def __getitem__(self, i: int | slice) -> SolveResult | list[SolveResult]:
        """Return row `i` as a SolveResult (built on first read, then kept), or a list for a slice."""
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        item = self.items[i]  # raises IndexError like a list, negative indices included
        if item is None:
            item = self._build([range(len(self))[i]])[0]
        return item

    def __iter__(self) -> Iterator[SolveResult]:
        if None in self.items:
            self._build([i for i, item in enumerate(self.items) if item is None])
        return iter(self.items)  # type: ignore[arg-type]  # every row is built now

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Results | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __add__(self, other: Sequence[SolveResult]) -> list[SolveResult]:
        return [*self, *other]

    def __radd__(self, other: Sequence[SolveResult]) -> list[SolveResult]:
        return [*other, *self]

    def __repr__(self) -> str:
        return f"Results({list(self)!r})"

    def _build(self, rows: list[int]) -> list[SolveResult]:
        """Make the SolveResults of `rows` from the columns (the fields `_collect` used to set), reading each
        column as a Python list once: for many rows several times cheaper than row by row."""
        names, at = [*self.names, None], np.asarray(rows, dtype=np.int64)  # solver id -1 reads None
        num = self.numbers
        arrays = (num.status, num.solver, num.time_ns, num.nodes, num.guesses, num.has_cost)
        arrays += (self.error_id,)
        columns = [a[at].tolist() for a in arrays]
        counts = self.counts[at].tolist() if self.counts is not None else [None] * len(rows)
        texts = None  # every row's solution text, made at once for the rows in `symbols`
        if len(rows) > 1:
            texts = self.solutions if self.symbols is None else symbol_texts(*self.symbols)
        built = []
        for i, code, sid, ns, nodes, guesses, zero, error, count in zip(rows, *columns, counts, strict=True):
            name = names[sid]
            item = self.items[i] = SolveResult(
                STATUS_BY_CODE[code],
                self.texts[i],
                self.solution(i) if texts is None else texts[i],
                0 if zero else None,
                name,
                ns / 1e9,
                nodes,
                guesses,
                0,
                count,
                self.error_texts[error],
                {} if name is None else {name: {"nodes": nodes, "guesses": guesses, "time_ms": ns / 1e6}},
            )
            built.append(item)
        return built

    def to_arrow(self, input_name: str = "<strings>") -> Any:
        """The records as an Arrow table: the Parquet output's fields and types, row i being line i + 1 and
        index i of the input `input_name` (pyarrow: `pip install 'sudoku-batch[parquet]'`), by the one Arrow
        builder from the pipeline's columns."""
        from solvers.model.frame import columns_table, need

        need("pyarrow", "Results.to_arrow()", "parquet")
        index = np.arange(len(self), dtype=np.int64)
        return columns_table(self.columns(self.texts), input_name, index, index + 1)

    def to_pandas(self, input_name: str = "<strings>") -> Any:
        """The records as a pandas DataFrame: what `pandas.read_parquet` reads from the Parquet output
        (`pip install 'sudoku-batch[dataframe]'`)."""
        from solvers.model.frame import need, to_pandas

        need("pandas", "Results.to_pandas()", "dataframe")
        need("pyarrow", "Results.to_pandas()", "dataframe")
        return to_pandas(self.to_arrow(input_name))

    def to_polars(self, input_name: str = "<strings>") -> Any:
        """The records as a polars DataFrame, from the Arrow table (`pip install 'sudoku-batch[polars]'`)."""
        from solvers.model.frame import need, to_polars

        need("polars", "Results.to_polars()", "polars")
        need("pyarrow", "Results.to_polars()", "polars")
        return to_polars(self.to_arrow(input_name))

    def columns(self, texts: Sequence[str]) -> ResultColumns:
        """The pipeline's columns of these results (aligned with the puzzle `texts`): the number arrays as
        they are (no copy), texts as UTF-8 buffers; rows read or born as objects laid over from them."""
        n = len(self)
        symbols = self.symbols
        if symbols is not None:
            solution = Texts.of_block(*symbols)
        else:
            solution = Texts.of([s or "" for s in self.solutions])
        error = Texts.empty(n)
        if self.error_id.any():
            error = Texts.of([e or "" for e in map(self.error_texts.__getitem__, self.error_id.tolist())])
        columns = ResultColumns(
            names=list(self.names),
            puzzle=puzzle_texts(texts),
            solution=solution,
            error=error,
            counters_raw=Texts.empty(n),
            **self.numbers.numbers(),
        )
        if not self.born and not any(self.items):
            return columns
        # rows stored as objects by `put` or already built: the objects are authoritative
        born = list(compress(range(len(self.items)), map(is_not, self.items, repeat(None))))
        objects = [self[i] for i in born]
        return columns.overlay(born, ResultColumns.build([r.puzzle for r in objects], objects))


def _ascii(values: np.ndarray, has: np.ndarray, table: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Grid values as ASCII symbols (`table[value]`, or "1".."9" for None), with their mask."""
    return (values + np.uint8(48) if table is None else table[values]), has
