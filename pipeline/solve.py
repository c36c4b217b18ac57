"""Solve one chunk: the function both transports run, and the answers the pipeline gives without solving.

Celery workers and the embedded local processes both call `solve_chunk`, so the two
transports cannot drift apart: it runs `solve_many` on the chunk's puzzles and returns a
`ChunkResult` holding the results' columns (`pipeline.columns`), which the collector
renders as it writes them. The producer answers invalid lines itself (`answered_chunk`)
and a chunk that cannot be solved at all is answered with `failed_chunk`: columns too,
built without loading the compiled solvers.
"""

from __future__ import annotations

import gc
import os
import socket
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from pipeline.columns import STATUS_NAMES, ResultColumns
from pipeline.result import ChunkHeader, ChunkResult, ChunkStats, Problem
from pipeline.runs import Runs, runs_array, to_runs
from pipeline.tasks import V_COLUMNS, ChunkTask
from solvers.result import Results, SolveResult, Status

if TYPE_CHECKING:
    from pipeline.escalation import Escalation

MAX_PROBLEMS = 1000  # invalid/error lines listed per chunk; the rest are only counted


def worker_name() -> str:
    """Name this process for statistics and liveness: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


def solve_chunk(
    task: ChunkTask, stop: np.ndarray | None = None, escalation: Escalation | None = None
) -> ChunkResult:
    """Solve every puzzle of a chunk into result columns; a failure becomes `error` results, never a raise.

    `solve_many` verifies every solved grid; this function still refuses to report
    `solved` with a non-zero cost. The garbage collector is paused meanwhile: the batch
    allocates many short-lived objects and no cycles, and collections would scan them all.
    `stop` (`solvers.stop`): raised by another thread, the solvers give up at their next
    check and the puzzles not answered by then come back `timeout`. `escalation`
    (`pipeline.escalation`, running) races a puzzle left unanswered too long on idle processes
    too; its rows then take the helpers' verified answer and counters (`pipeline.race.merge`).
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
                stop=stop, racing=None if escalation is None else escalation.racing,
            )  # fmt: skip
            if len(results) != len(texts):
                raise RuntimeError(f"the solver returned {len(results)} results for {len(texts)} puzzles")
        except Exception:  # noqa: BLE001 - find the puzzle that raised; the rest of the chunk is answered
            results = [_solve_alone(text, task, stop) for text in texts]
        if escalation is not None:
            _take_helpers(results, escalation)
        solver_cpu = time.process_time() - cpu0
        result = build_result(
            task.job, task.chunk, task.input, task.index_runs, task.line_runs, texts, results
        )
        if task.v < V_COLUMNS:  # a client that reads only records: render them here
            result.records  # noqa: B018 - rendering is the point
    finally:
        if was_enabled:
            gc.enable()
    stats = result.header.stats
    stats.solver_cpu_s = solver_cpu
    stats.cpu_s = time.process_time() - cpu0
    stats.wall_s = time.perf_counter() - wall0
    return result


def _take_helpers(results: Results | list[SolveResult], escalation: Escalation) -> None:
    """Fold each escalated row's helpers (verified grid, counters) into its one result."""
    from pipeline.race import merge

    for row, outcome in escalation.outcomes.items():
        if row < len(results):
            merged = merge(results[row], outcome)
            if isinstance(results, Results):
                results.put(row, merged)
            else:
                results[row] = merged


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
    results: Sequence[SolveResult],
) -> ChunkResult:
    """Make `results` (aligned with `texts`) a ChunkResult holding their columns, with its statistics."""
    columns = ResultColumns.build(texts, results)
    t = columns.tally()
    problems = []
    if t.problem_rows:
        indices, lines, status = runs_array(index_runs), runs_array(line_runs), columns.status
        errors = columns.error
        problems = [
            Problem(
                index=int(indices[i]),
                line=int(lines[i]),
                status=STATUS_NAMES[int(status[i])],
                error=errors.to_list(i, i + 1)[0],
            )
            for i in t.problem_rows[:MAX_PROBLEMS]
        ]
    stats = ChunkStats(
        n=len(columns),
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
        v=V_COLUMNS, job=job, chunk=chunk, input=input_name, index_runs=index_runs, line_runs=line_runs,
        stats=stats,
    )  # fmt: skip
    return ChunkResult(header, columns=columns)


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
    """Load the compiled solvers and renderers (numba cache) once, so the first chunk pays no compile time."""
    from pipeline.render.jsonl import counters_texts

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
    counters_texts(result.columns)  # the CSV and Parquet renderers' kernel
    result.lines()  # the JSON Lines renderer


def warm_all() -> None:
    """Compile (or load) every kernel a worker or a collector may run: solvers, generator, renderers."""
    from solvers.warm import warm_all as warm_solvers

    warm_solvers()
    warm()
