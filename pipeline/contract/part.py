"""A part of a solve chunk's answers as it is published: a JSON header, then its records.

A chunk is answered in parts (`pipeline.engine.solve`: its first pass at once, raced puzzles as they end),
each any rows of its chunk (`Part.row_runs`). The header (`PartHeader`) says which rows and puzzles it
answers, with their statistics (`PartStats`: what progress, the summary and chunk sizing read). The body is
the records rendered where they were solved (`pipeline.engine.render`), which a client moves into its output
unread, or, for a job read as `columns`, the `ResultColumns` in wire form (`pipeline.contract.wire`).
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from pipeline.contract.runs import Runs, expand_runs, runs_array
from pipeline.contract.tasks import VERSION
from pipeline.contract.wire import from_bytes, to_bytes
from solvers.model.columns import TIME_BINS_PER_DECADE, ResultColumns

PartId = tuple[int, int]  # (chunk, first row): a part's name among the job's


class Problem(BaseModel):
    """An input line that got no solution attempt (`invalid`) or whose solver failed (`error`)."""

    index: int
    line: int
    status: str
    error: str


class PartFile(BaseModel):
    """Where a part of a dataset job is (`pipeline.engine.dataset`): its file, its lines and puzzles."""

    name: str  # the file in the dataset's directory, once renamed into place
    temp: str  # where it was written first (`_temporary/...`): the client renames it if its worker could not
    input: str = ""  # the input its records are lines of
    bytes: int = 0
    first_line: int = 0  # the lowest and highest input line of its records
    last_line: int = 0
    first_index: int = 0  # the lowest and highest index (position among the job's puzzles)
    last_index: int = 0


class PartStats(BaseModel):
    """A part's tallies: enough for progress, the summary and chunk sizing without the records."""

    n: int
    chunk: int = -1  # the chunk the part belongs to
    chunk_n: int = 0  # puzzles of that whole chunk (a chunk is done when its parts add up to it)
    counts: dict[str, int] = {}
    wins: dict[str, int] = {}  # solver -> puzzles it answered (solved or approximate)
    approx_costs: dict[int, int] = {}  # cost -> approximate results with it
    time_bins: dict[int, int] = {}  # floor(TIME_BINS_PER_DECADE * log10(ms)) -> puzzles
    time_max_ms: float = 0.0
    solve_s: float = 0.0  # sum of the per-puzzle solve times reported by the solvers
    cpu_s: float = 0.0  # CPU time of the process for the part (solving its puzzles, rendering them)
    solver_cpu_s: float = 0.0  # CPU time inside `solve_many` alone
    wall_s: float = 0.0
    end: float = 0.0  # epoch seconds when the part was answered
    worker: str = ""
    problems: list[Problem] = []
    problems_dropped: int = 0
    file: PartFile | None = None  # a dataset job's part: its file (the records are there, not in the part)


class PartHeader(BaseModel):
    """The first line of a published part: which rows and puzzles it answers, its format and statistics."""

    v: int = VERSION
    job: str
    chunk: int
    row: int = 0  # the part's first row in its chunk
    rows: Runs = []  # its rows as (first, count) runs when they are not the one run from `row`
    input: str
    format: str = "columns"  # jsonl, csv, parquet (rendered records follow) or columns (wire columns follow)
    index_runs: Runs
    line_runs: Runs
    run_bytes: list[int] = []  # jsonl and csv: where each index run's rows start in the body, then its end
    stats: PartStats


class VersionMismatch(ValueError):
    """A part written by a process of another protocol version (`pipeline.contract.tasks.VERSION`)."""


class Part:
    """One part of a chunk's answers: its header and either its rendered records (`body`) or its columns."""

    __slots__ = ("header", "body", "columns")

    def __init__(
        self,
        header: PartHeader,
        body: bytes | bytearray | memoryview | None = None,
        columns: ResultColumns | None = None,
    ) -> None:
        if (body is None) == (columns is None):
            raise ValueError("a part holds either rendered records or columns")
        if sum(c for _, c in header.line_runs) != header.stats.n:
            raise ValueError("a part's lines must match its rows")
        if columns is not None and len(columns) != header.stats.n:
            raise ValueError("result columns must match the header's rows")
        runs = header.rows
        if runs and (sum(c for _, c in runs) != header.stats.n or runs[0][0] != header.row):
            raise ValueError("a part's row runs must start at its first row and hold its rows")
        self.header = header
        self.body = body
        self.columns = columns

    def __len__(self) -> int:
        return self.header.stats.n

    def row_runs(self) -> Runs:
        """The rows of its chunk the part answers, as (first row, count) runs."""
        return self.header.rows or [(self.header.row, self.header.stats.n)]

    @property
    def part(self) -> PartId:
        """(chunk, first row): the part's name."""
        return self.header.chunk, self.header.row

    @property
    def records(self) -> bytes | bytearray | memoryview:
        """The JSON Lines records joined by newlines (rendered now when held as columns)."""
        if self.columns is not None:
            from pipeline.engine.render.jsonl import render

            return render(self.columns, self.header.input, self.row_indices(), self.row_lines())
        if self.header.format != "jsonl":
            raise ValueError(f"this part was rendered as {self.header.format}, not as JSON Lines")
        body = self.body
        assert body is not None
        return body[:-1] if len(body) and body[-1:] == b"\n" else body

    def body_rows(self, start: int, stop: int) -> bytes | bytearray | memoryview:
        """The rendered rows `start:stop` of a JSON Lines or CSV body (cut at its index runs' edges)."""
        body = self.body
        assert body is not None
        if start == 0 and stop == len(self):
            return body
        counts = np.cumsum([0, *(c for _, c in self.header.index_runs)]).tolist()
        try:
            a, b = counts.index(start), counts.index(stop)
        except ValueError:
            raise ValueError(f"rows {start}:{stop} do not fall on the part's runs") from None
        offsets = self.header.run_bytes
        return memoryview(body)[offsets[a] : offsets[b]]

    def encode(self) -> bytes:
        """Serialise as the header's JSON, a newline, then the body as it is or the columns' wire form."""
        head = self.encode_head()
        if self.columns is not None:
            return to_bytes(self.columns, head)
        assert self.body is not None
        return b"".join([head, self.body])

    def encode_head(self) -> bytes:
        """The header's JSON and a newline: what `encode` puts before the body."""
        return self.header.model_dump_json().encode() + b"\n"

    @classmethod
    def with_head(cls, head: bytes, body: bytes | bytearray | memoryview) -> Part:
        """The part of an encoded header (`encode_head`) and its records, held apart (a local process's
        shared memory: `client.ring`); VersionMismatch as `decode`."""
        return cls(_header(head), body)

    @classmethod
    def decode(cls, payload: bytes | bytearray) -> Part:
        """Invert `encode` (VersionMismatch for another version's part, ValueError for one that does not
        hold together). A bytearray payload is taken over: its body or arrays stay where they are."""
        cut = payload.find(b"\n")
        if cut < 0:
            cut = len(payload)
        head = _header(payload[:cut])
        if head.format == "columns":
            return cls(head, columns=from_bytes(memoryview(payload)[cut + 1 :], head.stats.n))
        if isinstance(payload, bytearray):  # deleting a bytearray's head moves a pointer, not the bytes
            del payload[: cut + 1]
            return cls(head, payload)
        return cls(head, payload[cut + 1 :])

    def indices(self) -> list[int]:
        """Positions of the records among all puzzles of the job, in record order."""
        return expand_runs(self.header.index_runs)

    def row_indices(self) -> np.ndarray:
        """`indices` as an int64 array."""
        return runs_array(self.header.index_runs)

    def row_lines(self) -> np.ndarray:
        """The 1-based input line of each row (int64)."""
        return runs_array(self.header.line_runs)

    def lines(self) -> list[bytes]:
        """The records, one JSON text per puzzle."""
        records = bytes(self.records)
        return records.split(b"\n") if records else []


def _header(text: bytes | bytearray) -> PartHeader:
    """A part's header from its JSON; VersionMismatch for a part of another protocol version."""
    head = PartHeader.model_validate_json(text)
    if head.v != VERSION:
        raise VersionMismatch(f"part {head.chunk}:{head.row} is of protocol version {head.v}, not {VERSION}")
    return head


def time_bin_ms(time_bin: int) -> float:
    """The representative time (ms) of a histogram bin: its geometric middle."""
    return float(10 ** ((time_bin + 0.5) / TIME_BINS_PER_DECADE))
