"""A solve chunk's result as it is stored: a JSON header, then its columns (or, for older clients, records).

The header (`ChunkHeader`) says which puzzles the chunk answers and carries its statistics
(`ChunkStats`: what progress, the summary and chunk sizing read without the records). The
body is the chunk's `ResultColumns` in wire form (`pipeline.wire`, header `v` 2), which
the collector renders as it writes (`pipeline.render`), or, for a task of a client that
reads only those (`v` 1), the rendered JSON Lines records.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from pipeline.columns import TIME_BINS_PER_DECADE, ResultColumns
from pipeline.runs import Runs, expand_runs, runs_array
from pipeline.tasks import V_COLUMNS, V_RECORDS
from pipeline.wire import from_bytes, to_bytes


class Problem(BaseModel):
    """An input line that got no solution attempt (`invalid`) or whose solver failed (`error`)."""

    index: int
    line: int
    status: str
    error: str


class ChunkStats(BaseModel):
    """A chunk's tallies: enough for progress, the summary and chunk sizing without the records."""

    n: int
    counts: dict[str, int] = {}
    wins: dict[str, int] = {}  # solver -> puzzles it answered (solved or approximate)
    approx_costs: dict[int, int] = {}  # cost -> approximate results with it
    time_bins: dict[int, int] = {}  # floor(TIME_BINS_PER_DECADE * log10(ms)) -> puzzles
    time_max_ms: float = 0.0
    solve_s: float = 0.0  # sum of the per-puzzle solve times reported by the solvers
    cpu_s: float = 0.0  # CPU time of the process for the whole chunk (solve + columns)
    solver_cpu_s: float = 0.0  # CPU time inside `solve_many` alone
    wall_s: float = 0.0
    end: float = 0.0  # epoch seconds when the chunk finished
    worker: str = ""
    problems: list[Problem] = []
    problems_dropped: int = 0


class ChunkHeader(BaseModel):
    """The first line of a stored chunk result: which puzzles it answers, and its statistics."""

    v: int = V_RECORDS  # 1: rendered records follow; 2 (V_COLUMNS): result columns follow
    job: str
    chunk: int
    input: str
    index_runs: Runs
    line_runs: Runs | None = None  # (columns: the renderers write each record's line)
    stats: ChunkStats


class ChunkResult:
    """A chunk's header and its results: columns (rendered where they are written) or rendered records.

    Records are JSON Lines, one line per puzzle, in index order. Once the records are read,
    the columns are dropped (a result kept in memory is held in one form only).
    """

    __slots__ = ("header", "_records", "columns")

    def __init__(
        self,
        header: ChunkHeader,
        records: bytes | bytearray | None = None,
        columns: ResultColumns | None = None,
    ) -> None:
        if (records is None) == (columns is None):
            raise ValueError("a chunk result holds either records or columns")
        if columns is not None and (len(columns) != header.stats.n or header.line_runs is None):
            raise ValueError("result columns must match the header's rows and lines")
        self.header = header
        self._records = records
        self.columns = columns

    def __len__(self) -> int:
        return self.header.stats.n

    @property
    def records(self) -> bytes | bytearray:
        """The JSON Lines records (rendered now when they came as columns; loads the compiled renderer)."""
        if self._records is None:
            from pipeline.render.jsonl import render

            assert self.columns is not None and self.header.line_runs is not None  # __init__ ensures both
            self._records = render(self.columns, self.header.input, self.row_indices(), self.row_lines())
            self.columns = None  # held once: the records are what `encode` now writes
            self.header = self.header.model_copy(update={"v": V_RECORDS})
        return self._records

    def encode(self) -> bytes:
        """Serialise as the header's JSON, a newline, then the columns' wire form or the records as is."""
        head = self.header.model_dump_json().encode() + b"\n"
        if self.columns is not None:
            return to_bytes(self.columns, head)
        return head + self.records

    @classmethod
    def decode(cls, payload: bytes | bytearray) -> ChunkResult:
        """Invert `encode` (ValueError for columns that do not hold together).

        A bytearray payload is taken over: its records or arrays stay where they are (no copy).
        """
        cut = payload.find(b"\n")
        if cut < 0:
            cut = len(payload)
        header = ChunkHeader.model_validate_json(payload[:cut])
        if header.v >= V_COLUMNS:
            if header.line_runs is None or sum(c for _, c in header.line_runs) != header.stats.n:
                raise ValueError("packed results without the lines of their rows")
            return cls(header, columns=from_bytes(memoryview(payload)[cut + 1 :], header.stats.n))
        if isinstance(payload, bytearray):  # deleting a bytearray's head moves a pointer, not the bytes
            del payload[: cut + 1]
            return cls(header, payload)
        return cls(header, payload[cut + 1 :])

    def indices(self) -> list[int]:
        """Positions of the records among all puzzles of the job, in record order."""
        return expand_runs(self.header.index_runs)

    def row_indices(self) -> np.ndarray:
        """`indices` as an int64 array."""
        return runs_array(self.header.index_runs)

    def row_lines(self) -> np.ndarray:
        """The 1-based input line of each row, as an int64 array (results held as columns only)."""
        assert self.header.line_runs is not None
        return runs_array(self.header.line_runs)

    def lines(self) -> list[bytes]:
        """The records, one JSON text per puzzle."""
        return self.records.split(b"\n") if self.records else []


def time_bin_ms(time_bin: int) -> float:
    """The representative time (ms) of a histogram bin: its geometric middle."""
    return float(10 ** ((time_bin + 0.5) / TIME_BINS_PER_DECADE))
