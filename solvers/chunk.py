"""The one function that solves a chunk of a batch job, and the payloads around it.

A chunk is many puzzles of one input travelling as one message (`ChunkTask`, the
puzzles joined into one string) and coming back as one `ChunkResult`: a small JSON
header (which puzzles, and the chunk's statistics) followed by the results packed as
arrays (`solvers.chunk_wire`, ~190 bytes per 9x9 puzzle), which the collector renders
into JSON Lines records (~460 bytes) as it writes them. Results the producer answers
itself, and those of workers serving an older client, carry the rendered records
instead (`v` 1). Celery workers and the embedded local processes both call
`solve_chunk`, so the two transports cannot drift apart. The Redis
layout both sides share is plain data in `solvers.chunk_store` (no Redis import here).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import socket
import time
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from solvers.chunk_records import TIME_BINS_PER_DECADE, extract, render_py, tally
from solvers.chunk_wire import Packed, from_bytes, pack, to_bytes
from solvers.result import SolveResult, Status

TASK_NAME = "sudoku_batch.solve_chunk"
DEFAULT_QUEUE = "sudoku_batch"
SCHEMA = 1  # a result carrying rendered records; also the task of a client that reads only those
PACKED = 2  # a result carrying packed arrays; also the task of a client that reads them
JOB_ID_PATTERN = r"^[0-9a-f]{8,64}$"
MAX_PROBLEMS = 1000  # invalid/error lines listed per chunk; the rest are only counted
MAX_TASK_CHARS = 8 << 20  # puzzle text of one task message (the producer sends at most 1 MB by default)
MAX_CHUNK_PUZZLES = 1 << 17  # puzzles of one task message (each costs ~1 KB while solved)
MAX_RUNS = MAX_CHUNK_PUZZLES  # (first, count) runs of one task message
MAX_NAME_CHARS = 4096  # input name, portfolio and box texts
MAX_TIME_LIMIT_S = 86400.0  # the longest time limit per puzzle a task may ask for
Runs = list[tuple[int, int]]


class ChunkTask(BaseModel):
    """One task message: the puzzles of a chunk (joined by newlines) and how to solve them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: int = PACKED  # 2: the client reads packed results (older workers ignore this and render)
    job: str = Field(pattern=JOB_ID_PATTERN)
    chunk: int = Field(ge=0, lt=2**53)
    input: str = Field(max_length=MAX_NAME_CHARS)
    index_runs: Runs = Field(max_length=MAX_RUNS)  # (first, count): positions among the job's puzzles
    line_runs: Runs = Field(max_length=MAX_RUNS)  # (first, count): 1-based lines where the puzzles start
    puzzles: str = Field(max_length=MAX_TASK_CHARS)  # the puzzle texts joined by "\n"
    spans: list[int] | None = Field(default=None, max_length=MAX_CHUNK_PUZZLES)  # rows per multi-row puzzle
    box: str | None = Field(default=None, max_length=MAX_NAME_CHARS)
    time_limit: float | None = Field(default=None, gt=0, le=MAX_TIME_LIMIT_S)
    portfolio: str | None = Field(default=None, max_length=MAX_NAME_CHARS)
    seed: int = Field(default=0, ge=0, lt=2**63)

    @model_validator(mode="after")
    def _consistent(self) -> ChunkTask:
        """Refuse a message whose runs, spans and text disagree (a hand-made one could ask for huge lists)."""
        counts = [n for _, n in self.index_runs]
        if any(n < 1 for n in counts) or any(n < 1 for _, n in self.line_runs):
            raise ValueError("runs must have positive counts")
        if any(first < 0 for first, _ in self.index_runs) or any(first < 1 for first, _ in self.line_runs):
            raise ValueError("runs must start at index 0 or line 1 or later")
        n = sum(counts)
        if n > MAX_CHUNK_PUZZLES:
            raise ValueError(f"{n} puzzles in one chunk; at most {MAX_CHUNK_PUZZLES} are accepted")
        if sum(c for _, c in self.line_runs) != n:
            raise ValueError("index_runs and line_runs count different numbers of puzzles")
        rows = self.puzzles.count("\n") + 1 if n else 0
        if self.spans is None:
            if rows != n:
                raise ValueError(f"the text has {rows} lines for {n} puzzles")
        elif len(self.spans) != n or any(s < 1 for s in self.spans) or sum(self.spans) != rows:
            raise ValueError("spans do not match the puzzles' text")
        return self

    def __len__(self) -> int:
        return sum(n for _, n in self.index_runs)

    def texts(self) -> list[str]:
        """Return the puzzle texts, regrouping multi-row puzzles by `spans`."""
        return split_texts(self.puzzles, self.spans, len(self))


class ChunkRef(BaseModel):
    """A task message that names its chunk instead of carrying it: the worker reads the task from the outbox.

    The producer commits every task to the job's outbox before sending it (and the resend
    sweep and a resume send only outbox tasks), so the puzzles need not travel through the
    broker a second time: the message stays a few bytes instead of a base64 copy of ~1 MB.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: int = SCHEMA
    job: str = Field(pattern=JOB_ID_PATTERN)
    chunk: int = Field(ge=0, lt=2**53)
    ref: Literal["outbox"] = "outbox"


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
    cpu_s: float = 0.0  # CPU time of the process for the whole chunk (solve + render)
    solver_cpu_s: float = 0.0  # CPU time inside `solve_many` alone
    wall_s: float = 0.0
    end: float = 0.0  # epoch seconds when the chunk finished
    worker: str = ""
    problems: list[Problem] = []
    problems_dropped: int = 0


class ChunkHeader(BaseModel):
    """The first line of a stored chunk result: which puzzles it answers, and its statistics."""

    v: int = SCHEMA  # 1: rendered records follow; 2 (PACKED): packed arrays follow
    job: str
    chunk: int
    input: str
    index_runs: Runs
    line_runs: Runs | None = None  # (packed results: the renderer writes each record's line)
    stats: ChunkStats


class ChunkResult:
    """A chunk's header and its records (JSON Lines, one line per puzzle, in index order).

    The records are held rendered, or packed (`solvers.chunk_wire.Packed`) and rendered
    on first read: where they are written, not where they are solved.
    """

    __slots__ = ("header", "_records", "packed")

    def __init__(
        self, header: ChunkHeader, records: bytes | bytearray | None = None, packed: Packed | None = None
    ) -> None:
        if (records is None) == (packed is None):
            raise ValueError("a chunk result holds either records or packed results")
        if packed is not None and (len(packed) != header.stats.n or header.line_runs is None):
            raise ValueError("packed results must match the header's rows and lines")
        self.header = header
        self._records = records
        self.packed = packed

    def __len__(self) -> int:
        return self.header.stats.n

    @property
    def records(self) -> bytes | bytearray:
        """The JSON Lines records (rendered now when they came packed; loads the compiled renderer)."""
        if self._records is None:
            from solvers.chunk_render import render_packed

            assert self.packed is not None and self.header.line_runs is not None  # __init__ ensures both
            index, line = runs_array(self.header.index_runs), runs_array(self.header.line_runs)
            self._records = render_packed(self.header.input, index, line, self.packed)
            self.packed = None
            self.header = self.header.model_copy(update={"v": SCHEMA})  # what `encode` now writes
        return self._records

    def encode(self) -> bytes:
        """Serialise as the header's JSON, a newline, then the packed results or the records as they are."""
        head = self.header.model_dump_json().encode() + b"\n"
        if self.packed is not None:
            return to_bytes(self.packed, head)
        return head + self.records

    @classmethod
    def decode(cls, payload: bytes | bytearray) -> ChunkResult:
        """Invert `encode` (ValueError for packed results that do not hold together).

        A bytearray payload is taken over: its records or arrays stay where they are (no copy).
        """
        cut = payload.find(b"\n")
        if cut < 0:
            cut = len(payload)
        header = ChunkHeader.model_validate_json(payload[:cut])
        if header.v >= PACKED:
            if header.line_runs is None or sum(c for _, c in header.line_runs) != header.stats.n:
                raise ValueError("packed results without the lines of their rows")
            return cls(header, packed=from_bytes(memoryview(payload)[cut + 1 :], header.stats.n))
        if isinstance(payload, bytearray):  # deleting a bytearray's head moves a pointer, not the bytes
            del payload[: cut + 1]
            return cls(header, payload)
        return cls(header, payload[cut + 1 :])

    def indices(self) -> list[int]:
        """Positions of the records among all puzzles of the job, in record order."""
        return expand_runs(self.header.index_runs)

    def lines(self) -> list[bytes]:
        """The records, one JSON text per puzzle."""
        return self.records.split(b"\n") if self.records else []


def to_runs(values: Sequence[int]) -> Runs:
    """Compress increasing integers into (first, count) runs of consecutive values."""
    if not values:
        return []
    arr = np.asarray(values, dtype=np.int64)
    breaks = np.flatnonzero(np.diff(arr) != 1) + 1
    starts = np.concatenate(([0], breaks))
    counts = np.diff(np.concatenate((starts, [len(arr)])))
    return [(int(arr[s]), int(c)) for s, c in zip(starts, counts, strict=True)]


def expand_runs(runs: Runs) -> list[int]:
    """Invert `to_runs`."""
    out: list[int] = []
    for first, count in runs:
        out.extend(range(first, first + count))
    return out


def runs_array(runs: Runs) -> np.ndarray:
    """`expand_runs` as an int64 array (vectorised)."""
    if not runs:
        return np.zeros(0, np.int64)
    firsts, counts = np.array(runs, dtype=np.int64).reshape(-1, 2).T
    starts = np.cumsum(counts) - counts
    return np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(firsts - starts, counts)


def join_texts(texts: list[str]) -> tuple[str, list[int] | None]:
    """Join puzzle texts with newlines; return the rows per text when some text has several."""
    joined = "\n".join(texts)
    if not texts or joined.count("\n") == len(texts) - 1:
        return joined, None
    return joined, [t.count("\n") + 1 for t in texts]


def split_texts(joined: str, spans: list[int] | None, count: int) -> list[str]:
    """Invert `join_texts`."""
    if count == 0:
        return []
    parts = joined.split("\n")
    if spans is None:
        return parts
    out: list[str] = []
    at = 0
    for span in spans:
        out.append("\n".join(parts[at : at + span]))
        at += span
    return out


_ENTRY_HEAD, _ENTRY_TASK = '{"at":', ',"task":'


def outbox_entry(at: float, task_json: str) -> str:
    """An outbox entry: `{"at": <epoch s>, "task": <the task's JSON object>}`, by concatenation.

    The task is nested as an object, not as a JSON string: escaping a megabyte of task
    JSON again (its newlines become `\\n`) cost ~3 ms per chunk, concatenating 0.1 ms.
    """
    return f"{_ENTRY_HEAD}{at!r}{_ENTRY_TASK}{task_json}}}"


def read_outbox_entry(raw: bytes | str) -> tuple[float, str]:
    """Invert `outbox_entry`: (sent at, task JSON); also reads the older form whose task is a JSON string."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    cut = (
        text.find(_ENTRY_TASK, len(_ENTRY_HEAD), len(_ENTRY_HEAD) + 40)
        if text.startswith(_ENTRY_HEAD)
        else -1
    )
    if cut > 0 and text.endswith("}"):
        return float(text[len(_ENTRY_HEAD) : cut]), text[cut + len(_ENTRY_TASK) : -1]
    entry = json.loads(text)
    task = entry["task"]
    return float(entry["at"]), task if isinstance(task, str) else json.dumps(task)


def chunk_seed(job: str, chunk: int) -> int:
    """Derive a chunk's solver seed from the job id and chunk index (stable across machines)."""
    digest = hashlib.blake2b(f"{job}:{chunk}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") & (2**62 - 1)) | 1


def worker_name() -> str:
    """Name this process for statistics and liveness: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


def solve_chunk(task: ChunkTask, stop: np.ndarray | None = None) -> ChunkResult:
    """Solve and render every puzzle of a chunk; a failure becomes `error` results, never a raise.

    `solve_many` verifies every solved grid; this function still refuses to report
    `solved` with a non-zero cost. The garbage collector is paused meanwhile: the batch
    allocates many short-lived objects and no cycles, and collections would scan them all.
    `stop` (`solvers.stop`): raised by another thread, the solvers give up at their next
    check and the puzzles not answered by then come back `timeout`.
    """
    from solvers.api import solve_many  # the compiled solvers load only where puzzles are solved

    texts = task.texts()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            results = solve_many(
                texts, box=task.box, time_limit=task.time_limit, portfolio=task.portfolio, seed=task.seed,
                stop=stop,
            )  # fmt: skip
            if len(results) != len(texts):
                raise RuntimeError(f"the solver returned {len(results)} results for {len(texts)} puzzles")
        except Exception:  # noqa: BLE001 - find the puzzle that raised; the rest of the chunk is answered
            results = [_solve_alone(text, task, stop) for text in texts]
        solver_cpu = time.process_time() - cpu0
        result = build_result(
            task.job, task.chunk, task.input, task.index_runs, task.line_runs, texts, results,
            packed=task.v >= PACKED,
        )  # fmt: skip
    finally:
        if was_enabled:
            gc.enable()
    stats = result.header.stats
    stats.solver_cpu_s = solver_cpu
    stats.cpu_s = time.process_time() - cpu0
    stats.wall_s = time.perf_counter() - wall0
    return result


def _solve_alone(text: str, task: ChunkTask, stop: np.ndarray | None = None) -> SolveResult:
    """Solve one puzzle by itself; a solver exception becomes its `error` result with the reason."""
    from solvers.api import solve_many

    try:
        (result,) = solve_many(
            [text], box=task.box, time_limit=task.time_limit, portfolio=task.portfolio, seed=task.seed,
            stop=stop,
        )  # fmt: skip
        return result
    except Exception as exc:  # noqa: BLE001 - the reason goes into the record, the worker carries on
        return SolveResult(Status.ERROR, text, error=f"{type(exc).__name__}: {exc}"[:500])


def build_result(
    job: str,
    chunk: int,
    input_name: str,
    index_runs: Runs,
    line_runs: Runs,
    texts: list[str],
    results: list[SolveResult],
    packed: bool = False,
) -> ChunkResult:
    """Make `results` (aligned with `texts`) a ChunkResult with its statistics.

    `packed` keeps them as arrays for the collector to render (workers, when the task's
    client reads those: `ChunkTask.v`); otherwise they are rendered here in plain Python
    (the producer's few `invalid` answers, failure answers, and older clients).
    """
    cols = extract(results)
    if packed:
        indices, lines = runs_array(index_runs), runs_array(line_runs)
        records, body = None, pack(texts, cols)
    else:
        indices, lines = expand_runs(index_runs), expand_runs(line_runs)
        records, body = render_py(input_name, indices, lines, texts, cols), None
    t = tally(cols)
    problems = [
        Problem(
            index=int(indices[i]),
            line=int(lines[i]),
            status=results[i].status.value,
            error=cols.errors[i] or "",
        )
        for i in t.problem_rows[:MAX_PROBLEMS]
    ]
    stats = ChunkStats(
        n=len(results),
        counts=t.counts,
        wins=t.wins,
        approx_costs=t.approx_costs,
        time_bins=t.time_bins,
        time_max_ms=t.time_max_ms,
        solve_s=t.solve_s,
        end=time.time(),
        worker=worker_name(),
        problems=problems,
        problems_dropped=max(0, len(t.problem_rows) - MAX_PROBLEMS),
    )
    header = ChunkHeader(
        v=PACKED if packed else SCHEMA,
        job=job,
        chunk=chunk,
        input=input_name,
        index_runs=index_runs,
        line_runs=line_runs if packed else None,
        stats=stats,
    )
    return ChunkResult(header, records, body)


def answered_chunk(
    job: str,
    chunk: int,
    input_name: str,
    indices: list[int],
    lines: list[int],
    texts: list[str],
    errors: list[str],
) -> ChunkResult:
    """Build the `invalid` results the producer answers itself, as a chunk like any other."""
    results = [SolveResult(Status.INVALID, t, error=e) for t, e in zip(texts, errors, strict=True)]
    out = build_result(job, chunk, input_name, to_runs(indices), to_runs(lines), texts, results)
    out.header.stats.worker = "producer"
    return out


def failed_chunk(task: ChunkTask, reason: str, status: Status = Status.ERROR) -> ChunkResult:
    """Answer every puzzle of a chunk with `status` (`error`: it could not be solved at all)."""
    texts = task.texts()
    results = [SolveResult(status, t, error=reason) for t in texts]
    return build_result(task.job, task.chunk, task.input, task.index_runs, task.line_runs, texts, results)


def warm() -> None:
    """Load the compiled solvers and renderer (numba cache) once, so the first chunk pays no compile time."""
    solve_chunk(
        ChunkTask(
            job="0" * 8,
            chunk=0,
            input="warm",
            index_runs=[(0, 2)],
            line_runs=[(1, 2)],
            puzzles="." * 16 + "\n" + "." * 81,
            time_limit=1.0,
        )
    ).lines()  # the generic and 9x9 kernels, and the renderer


def time_bin_ms(time_bin: int) -> float:
    """The representative time (ms) of a histogram bin: its geometric middle."""
    return float(10 ** ((time_bin + 0.5) / TIME_BINS_PER_DECADE))
