"""Solve a chunk into parts published as they are found (every transport runs `solve_parts`, so none drifts),
and the answers the pipeline gives without solving; a part is rendered where it is made."""

from __future__ import annotations

import gc
import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import TYPE_CHECKING

import numpy as np

from pipeline.contract.formats import FORMATS
from pipeline.contract.part import Part, PartHeader, PartStats, Problem
from pipeline.contract.runs import Runs, runs_array, to_runs
from pipeline.contract.tasks import ChunkTask
from pipeline.engine.gather import Clock, Gather
from pipeline.engine.storage import StorageError
from solvers.model.columns import ResultColumns
from solvers.model.result import Results, SolveResult
from solvers.model.status import STATUS_NAMES, Status

if TYPE_CHECKING:
    from pipeline.engine.render import Arena
    from pipeline.escalation.board import Escalation

log = logging.getLogger(__name__)
MAX_PROBLEMS = 1000  # invalid/error lines listed per part; the rest are only counted
Publish = Callable[[Part], object]


def worker_name() -> str:
    """Name this process for statistics and liveness: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


def solve_chunk(task: ChunkTask) -> Part:
    """Solve every puzzle of a chunk into one part of all its rows, in the task's format; a failure becomes
    `error` results, never a raise (the tests' and benches' way to run a chunk at once)."""
    if not len(task):  # a task of no puzzle (a hand-made message): an empty answer
        return empty_part(task)
    parts: list[Part] = []
    solve_parts(task, list(range(len(task))), parts.append, whole=True)
    return parts[0]


def solve_parts(
    task: ChunkTask,
    rows: list[int],
    publish: Publish,
    stop: np.ndarray | None = None,
    escalation: Escalation | None = None,
    whole: bool = False,
    arena: Arena | None = None,
) -> None:
    """Solve rows `rows` of a chunk (increasing) and hand each part to `publish` once its answers are final:
    the first pass at once, raced puzzles gathered as their races end (`whole`: one part at the end). A
    solver that raises is answered puzzle by puzzle; the garbage collector is paused (no cycles are made)."""
    from solvers.api import solve_many  # the compiled solvers load only where puzzles are solved

    at = np.asarray(rows, dtype=np.int64)
    if not len(at):
        return
    parts = _ChunkParts(task, at, _chunk_texts(task, at), publish, escalation, arena)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            with parts.gather:
                out = solve_many(
                    parts.texts,
                    box=task.box,
                    time_limit=task.time_limit,
                    portfolio=task.portfolio,
                    seed=task.seed,
                    stop=stop,
                    racing=None if escalation is None else lambda i: escalation.racing(int(at[i])),
                    on_final=None if whole else parts.emit,
                )
            if len(out) != len(parts.texts):
                raise RuntimeError(f"the solver returned {len(out)} results for {len(parts.texts)} puzzles")
        except StorageError:  # publishing a part failed, not the solver: the job's storage fails the chunk
            raise
        except Exception as exc:  # noqa: BLE001 - find the puzzle that raised; the rest of the chunk is answered
            parts.answer_alone(exc, stop)
            return
        if whole:
            parts.publish_whole(out)
    finally:
        if was_enabled:
            gc.enable()


def _chunk_texts(task: ChunkTask, at: np.ndarray) -> Sequence[str]:
    """The puzzles of chunk rows `at` (increasing and unique), as `solve_many` reads them: all of a chunk of
    one puzzle a line read at once (no str per puzzle)."""
    from solvers.model.parse import Lines

    every = len(at) == len(task)  # increasing and unique: all of them
    if every and task.spans is None:  # one puzzle a line: read at once, no str per puzzle
        return Lines(task.puzzles, len(task))
    all_texts = task.texts()
    return all_texts if every else [all_texts[r] for r in at.tolist()]


@dataclass
class _ChunkParts:
    """One `solve_parts` run's parts as its answers become final (the first pass's columns, built once; the
    rows published; raced puzzles gathered), each charged by one clock: the state its callbacks share."""

    task: ChunkTask
    at: np.ndarray  # the chunk rows solved (increasing)
    texts: Sequence[str]  # their puzzles
    publish: Publish
    escalation: Escalation | None
    arena: Arena | None
    runs: tuple[np.ndarray, np.ndarray] = field(init=False)  # the task's index and line runs expanded
    clock: Clock = field(init=False)
    done: np.ndarray = field(init=False)  # the positions (of `texts`) published
    first: list[ResultColumns] = field(init=False)  # every row's columns as the first pass left them
    gather: Gather = field(init=False)

    def __post_init__(self) -> None:
        self.runs = (runs_array(self.task.index_runs), runs_array(self.task.line_runs))
        self.clock = Clock()
        self.done = np.zeros(len(self.at), dtype=bool)
        self.first = []
        self.gather = Gather(self.gathered)

    def put(self, positions: np.ndarray, columns: ResultColumns) -> None:
        """Publish the answers at `positions` (increasing, of `texts`) as one part."""
        self.publish(_part(self.task, self.at[positions], columns, self.clock, self.runs, self.arena))
        self.done[positions] = True

    def gathered(self, positions: np.ndarray, merged: list[SolveResult]) -> None:
        """Publish raced puzzles' answers as one part (`Gather` calls it as their races end)."""
        self.clock.solved()
        self.put(positions, ResultColumns.build([self.texts[i] for i in positions.tolist()], merged))

    def emit(self, results: Results, positions: Sequence[int] | np.ndarray) -> None:
        """The answers at `positions` (of `texts`) are final: the first pass's go out at once, as one part;
        each raced puzzle's is gathered (`Gather`)."""
        if self.first:
            at, escalation = self.at, self.escalation
            self.gather.add(
                [(i, _merged(results, i, int(at[i]), escalation)) for i in np.asarray(positions).tolist()]
            )
            return
        self.clock.solved()
        self.first.append(ResultColumns.build(self.texts, results))  # type: ignore[arg-type]
        final = np.sort(np.asarray(positions, dtype=np.int64))
        if len(final):
            self.put(final, self.first[0].take(final))

    def answer_alone(self, exc: Exception, stop: np.ndarray | None) -> None:
        """The batch raised `exc`: solve every puzzle not yet published by itself, so the one that raised
        answers `error` and the rest of the chunk is answered."""
        left = np.flatnonzero(~self.done)
        log.warning("chunk %s: batch failed, %d puzzles solved alone: %s", self.task.chunk, len(left), exc)
        alone = [_solve_alone(self.texts[i], self.task, stop) for i in left.tolist()]
        self.clock.solved()
        if len(left):
            self.put(left, ResultColumns.build([self.texts[i] for i in left.tolist()], alone))

    def publish_whole(self, out: Results) -> None:
        """Publish every row's answer (helpers' folded in) as the one part of a `whole` run."""
        at, escalation = self.at, self.escalation
        merged = [_merged(out, i, int(at[i]), escalation) for i in range(len(at))] if escalation else out
        self.clock.solved()
        columns = ResultColumns.build(self.texts, merged)  # type: ignore[arg-type]
        self.publish(_part(self.task, at, columns, self.clock, self.runs, self.arena))


def _merged(results: Sequence[SolveResult], i: int, row: int, escalation: Escalation | None) -> SolveResult:
    """Result i (chunk row `row`), with its helpers' verified answer and counters when it was escalated."""
    result = results[i]
    if escalation is not None and row in escalation.ends:
        from pipeline.escalation.task import fold_helpers

        result = fold_helpers(result, escalation.ends[row])
    return result


def _part(
    task: ChunkTask,
    rows: Sequence[int] | np.ndarray,
    columns: ResultColumns,
    clock: Clock | None = None,
    runs: tuple[np.ndarray, np.ndarray] | None = None,
    arena: Arena | None = None,
) -> Part:
    """The part of chunk rows `rows` (increasing: one run or several), rendered in the task's format, charged
    by `clock` (`runs`: the task's index and line runs expanded, when the caller has them)."""
    at = np.asarray(rows, dtype=np.int64)
    if runs is None:
        runs = (runs_array(task.index_runs), runs_array(task.line_runs))
    index_all, lines_all = runs
    row_runs = to_runs(at)
    if len(row_runs) == 1:  # one run: views of the task's arrays
        a, b = int(at[0]), int(at[-1]) + 1
        index, lines = index_all[a:b], lines_all[a:b]
    else:
        index, lines = index_all[at], lines_all[at]
    part = build_part(
        task.job,
        task.chunk,
        int(at[0]),
        len(task),
        task.input,
        index,
        lines,
        columns,
        task.format,
        arena,
        rows=row_runs if len(row_runs) > 1 else None,
    )
    if clock is not None:
        clock.charge(part.header.stats)
    return part


def _solve_alone(text: str, task: ChunkTask, stop: np.ndarray | None = None) -> SolveResult:
    """Solve one puzzle by itself; a solver exception becomes its `error` result with the reason."""
    from solvers.api import solve_many

    try:
        (result,) = solve_many(
            [text],
            box=task.box,
            time_limit=task.time_limit,
            portfolio=task.portfolio,
            seed=task.seed,
            stop=stop,
        )
        return result
    except Exception as exc:  # noqa: BLE001 - the reason goes into the record, the worker carries on
        return SolveResult(Status.ERROR, text, error=f"{type(exc).__name__}: {exc}"[:500])


def build_part(
    job: str,
    chunk: int,
    row: int,
    chunk_n: int,
    input_name: str,
    index: np.ndarray,
    lines: np.ndarray,
    columns: ResultColumns,
    fmt: str,
    arena: Arena | None = None,
    rows: Runs | None = None,
) -> Part:
    """The part of rows `row`.. (or the row runs `rows`) of a chunk of `chunk_n` puzzles holding `columns`
    (at `index`, from `lines`), with its statistics, rendered in `fmt` (into `arena`'s buffer when free)."""
    stats = _part_stats(chunk, chunk_n, index, lines, columns)
    index_runs, line_runs = to_runs(index), to_runs(lines)
    header = PartHeader(
        job=job,
        chunk=chunk,
        row=row,
        rows=rows or [],
        input=input_name,
        format=fmt,
        index_runs=index_runs,
        line_runs=line_runs,
        stats=stats,
    )
    if not FORMATS[fmt].rendered:
        return Part(header, columns=columns)
    from pipeline.engine.render import render_runs

    counts = [count for _, count in index_runs]  # rendered run by run: a reader may cut at their edges
    runs = list(zip(accumulate(counts, initial=0), counts, strict=False))  # (first row, count) of each run
    body, header.run_bytes = render_runs(columns, input_name, index, lines, fmt, runs, arena)
    return Part(header, memoryview(body))


def _part_stats(
    chunk: int, chunk_n: int, index: np.ndarray, lines: np.ndarray, columns: ResultColumns
) -> PartStats:
    """The statistics of a part holding `columns` (at `index`, from `lines`), with its first MAX_PROBLEMS
    `error` or `invalid` rows named by index and line (the rest counted): what the summary adds up."""
    t = columns.tally()
    problems = []
    if t.problem_rows:
        status, errors = columns.status, columns.error
        problems = [
            Problem(
                index=int(index[i]),
                line=int(lines[i]),
                status=STATUS_NAMES[int(status[i])],
                error=errors.to_list(i, i + 1)[0],
            )
            for i in t.problem_rows[:MAX_PROBLEMS]
        ]
    return PartStats(
        n=len(columns),
        chunk=chunk,
        chunk_n=chunk_n,
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


def build_result(
    job: str,
    chunk: int,
    input_name: str,
    index_runs: Runs,
    line_runs: Runs,
    texts: list[str],
    results: Sequence[SolveResult],
    fmt: str = "columns",
) -> Part:
    """The part of a whole chunk holding `results` (aligned with `texts`, their puzzles at `index_runs` from
    `line_runs`), rendered in `fmt`."""
    columns = ResultColumns.build(texts, results)
    index, lines = runs_array(index_runs), runs_array(line_runs)
    return build_part(job, chunk, 0, len(texts), input_name, index, lines, columns, fmt)


def answered_chunk(
    job: str,
    chunk: int,
    input_name: str,
    indices: list[int],
    lines: list[int],
    texts: list[str],
    errors: list[str],
    fmt: str = "columns",
) -> Part:
    """Build the `invalid` results the producer answers itself, as a chunk like any other (one part)."""
    results = [SolveResult(Status.INVALID, t, error=e) for t, e in zip(texts, errors, strict=True)]
    out = build_result(job, chunk, input_name, to_runs(indices), to_runs(lines), texts, results, fmt)
    out.header.stats.worker = "producer"
    return out


def failed_parts(
    task: ChunkTask, reason: str | dict[int, str], status: Status, rows: list[int]
) -> list[Part]:
    """Answer rows `rows` of a chunk with `status` and `reason` (one for all, or each row's: a split's lines
    its worker's reader rejected) without solving: a part per run of consecutive rows, in its format."""
    texts = task.texts()
    parts, at = [], 0
    for _, count in to_runs(rows):
        chosen, at = rows[at : at + count], at + count
        why = [reason if isinstance(reason, str) else reason[r] for r in chosen]
        results = [SolveResult(status, texts[r], error=e) for r, e in zip(chosen, why, strict=True)]
        parts.append(_part(task, chosen, ResultColumns.build([texts[r] for r in chosen], results)))
    return parts


def empty_part(task: ChunkTask) -> Part:
    """The one part of a chunk of no rows (a split owning no puzzle line): it completes the chunk."""
    none = np.zeros(0, dtype=np.int64)
    columns = ResultColumns.build([], [])
    return build_part(task.job, task.chunk, 0, 0, task.input, none, none, columns, task.format)


def warm() -> None:
    """Load the compiled solvers and renderers (numba cache) every solving process needs, so its first chunk
    pays no compile time."""
    from pipeline.engine.render.jsonl import counters_texts, render_csv
    from solvers.model.parse import parse_puzzle, read_framed

    parse_puzzle("." * 81)  # one puzzle's parse: a race helper's, a line the batch refused
    read_framed("." * 81, 1, 81, 9)  # a chunk of one-length compact lines, read at once (most corpora)

    result = solve_chunk(
        ChunkTask(
            job="0" * 8,
            chunk=0,
            input="warm",
            index_runs=[(0, 2)],
            line_runs=[(1, 2)],
            puzzles="." * 16 + "\n" + "." * 81,
            time_limit=1.0,
        )
    )  # the generic and 9x9 kernels
    assert result.columns is not None
    counters_texts(result.columns)  # the Parquet renderer's kernel
    render_csv(result.columns, "warm", result.row_indices(), result.row_lines())  # the CSV writer
    result.lines()  # the JSON Lines writer


def warm_all() -> None:
    """Compile (or load) every kernel a worker or a collector may run: solvers, generator, renderers."""
    from solvers.warm import warm_all as warm_solvers

    warm_solvers()
    warm()
