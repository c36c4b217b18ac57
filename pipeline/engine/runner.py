"""The one way a task is run, wherever it runs (`execute`, with the `ChunkPort` where it meets its job): a
redelivered chunk solves only the rows no part answered, so every input line gets exactly one record."""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec

import numpy as np

from pipeline.contract.part import Part
from pipeline.contract.tasks import GENERATE_TASK_NAME, HELPER_TASK_NAME, ChunkTask
from pipeline.engine.port import ChunkPort
from pipeline.engine.solve import empty_part, failed_parts, solve_parts, worker_name
from pipeline.engine.stop import StopPoller
from pipeline.engine.storage import StorageError
from solvers.model.status import Status

if TYPE_CHECKING:
    from pipeline.contract.generate import GenerateResult, GenerateTask
    from pipeline.engine.roots import DataRoots
    from pipeline.escalation.board import Board
    from pipeline.escalation.task import HelperTask

    Task = ChunkTask | GenerateTask | HelperTask

log = logging.getLogger(__name__)
STOP_POLL_S = 0.25
P = ParamSpec("P")


def execute(
    task: Task,
    port: ChunkPort,
    board: Board | None = None,
    *,
    attempts: int | None = None,
    max_attempts: int | None = None,
    poll_s: float = STOP_POLL_S,
    roots: DataRoots | None = None,
) -> int:
    """Run one task of any kind where this process meets its job (`port`) and, racing, the other processes
    (`board`): the puzzles it answered; what no part carried is charged to the job at its end (`settled`)."""
    with settled(port, task.job):
        if isinstance(task, ChunkTask):
            escalation = None if board is None else functools.partial(_escalation, board=board, poll_s=poll_s)
            return run_chunk(
                port,
                task,
                max_attempts=max_attempts,
                escalation=escalation,
                poll_s=poll_s,
                attempts=attempts,
                roots=roots,
            )
        if task.NAME == HELPER_TASK_NAME:  # a helper of another process's escalation
            from pipeline.escalation.board import run_helper

            result = None if board is None else run_helper(task, board, poll_s)  # type: ignore[arg-type]
            return int(result is not None and result.status == Status.SOLVED)
        from pipeline.contract.generate import GenerateResult, generate_result

        if attempts is None:
            attempts = port.count_delivery(task.job, task.chunk)
        if attempts is None:
            return 0  # purged or expired: nobody is waiting for this chunk
        if max_attempts is not None and attempts > max_attempts:
            reason = f"the chunk was started {attempts - 1} times without an answer (worker crash?)"
            made = GenerateResult.failed(task.job, task.chunk, reason)
        else:
            made = generate_result(task)  # type: ignore[arg-type]
        port.publish_generated(made)
        return len(made)


@contextlib.contextmanager
def settled(port: ChunkPort, job: str) -> Iterator[None]:
    """Charge `job` what this run spent since its last part when the run ends, however it ends
    (`ChunkPort.settle`); a charge that fails is one log line: the run's answers (or its own error) stand."""
    try:
        yield
    finally:
        try:
            port.settle(job)
        except Exception as exc:  # noqa: BLE001 - the cost is a figure: its loss must not fail the run
            log.warning("job %s: the end of a run is not counted in its cost: %s", job, exc)


def _escalation(task: ChunkTask, stop: np.ndarray, board: Board, poll_s: float) -> Any:
    """The escalation of a chunk's slow puzzles on `board`, its module loaded by the first chunk that asks."""
    from pipeline.escalation.board import Escalation

    return Escalation(task, board, stop, poll_s=poll_s)


def give_up(
    port: ChunkPort,
    task: Task,
    reason: str,
    status: Status,
    cpu_s: float = 0.0,
    roots: DataRoots | None = None,
) -> int:
    """Answer what a task cut short (a time limit) left unanswered with `status` and `reason`: a solve chunk's
    rows no part answered (`fail_rest`), a generate chunk's error (a stored answer stays)."""
    if isinstance(task, ChunkTask):
        return fail_rest(port, task, reason, status, roots=roots)
    if task.NAME == GENERATE_TASK_NAME:
        from pipeline.contract.generate import GenerateResult

        port.publish_generated(GenerateResult.failed(task.job, task.chunk, reason, cpu_s))
    return 0


def unanswered(n: int, published: list[tuple[int, int]]) -> list[int]:
    """The rows of a chunk of `n` puzzles no published part holds."""
    todo = np.ones(n, dtype=bool)
    for row, count in published:
        todo[row : row + count] = False
    return np.flatnonzero(todo).tolist()


def _storage_fails_job(
    run: Callable[Concatenate[ChunkPort, ChunkTask, P], int],
) -> Callable[Concatenate[ChunkPort, ChunkTask, P], int]:
    """`run(port, task, ...)` whose error of the job's storage (`StorageError`) fails the job through the port
    alone, in one line naming this process, the path and the reason."""

    @functools.wraps(run)
    def guarded(port: ChunkPort, task: ChunkTask, *args: P.args, **kwargs: P.kwargs) -> int:
        try:
            return run(port, task, *args, **kwargs)
        except StorageError as exc:
            port.fail_job(task.job, storage_failure(exc))
            return 0

    return guarded


def storage_failure(exc: StorageError) -> str:
    """The one line a job fails with when this process cannot use its storage."""
    return f"worker {worker_name()} cannot reach the job's storage: {exc}"


@_storage_fails_job
def run_chunk(
    port: ChunkPort,
    task: ChunkTask,
    *,
    max_attempts: int | None = None,
    escalation: Callable[[ChunkTask, np.ndarray], contextlib.AbstractContextManager[Any]] | None = None,
    poll_s: float = STOP_POLL_S,
    attempts: int | None = None,
    roots: DataRoots | None = None,
) -> int:
    """Run one delivery of a chunk; the puzzles it answered. One delivered more than `max_attempts` times is
    answered `error`, not tried forever; `escalation` (task, stop flag): the context racing its slow puzzles;
    `roots`: a worker's data roots (None: the user's own processes, which read what the user can)."""
    if attempts is None:
        attempts = port.count_delivery(task.job, task.chunk)
    if attempts is None:
        return 0  # purged or expired: nobody is waiting for this chunk
    worn = attempts - 1 if max_attempts is not None and attempts > max_attempts + 1 else 0
    todo = _todo(port, task, roots, worn)
    if todo is None:
        return 0
    task, port, rows, valid, reasons = todo
    if max_attempts is not None and attempts > max_attempts:
        reason = f"the chunk was started {attempts - 1} times without an answer (worker crash?)"
        return sum(len(p) for p in failed_parts(task, reason, Status.ERROR, rows) if port.publish(p))
    answered = [0]

    def publish(part: Part) -> None:
        if port.publish(part):
            answered[0] += len(part)

    bad = [r for r in rows if r >= valid]  # a split's invalid lines: answered at once, not solved
    if bad:
        for part in failed_parts(task, {r: reasons[r - valid] for r in bad}, Status.INVALID, bad):
            publish(part)
        rows = [r for r in rows if r < valid]
    with StopPoller(lambda: port.stopped(task.job), poll_s) as poller:
        escalating = escalation(task, poller.flag) if escalation is not None and task.escalate_after else None
        with escalating if escalating is not None else contextlib.nullcontext() as running:
            solve_parts(task, rows, publish, poller.flag, running, arena=getattr(port, "arena", None))
    return answered[0]


@_storage_fails_job
def fail_rest(
    port: ChunkPort,
    task: ChunkTask,
    reason: str,
    status: Status = Status.ERROR,
    roots: DataRoots | None = None,
) -> int:
    """Answer the rows of a chunk no part answered yet with `status` (a run cut short: a time limit); `roots`
    as in `run_chunk`."""
    todo = _todo(port, task, roots)
    if todo is None:
        return 0
    task, port, rows, _, _ = todo
    return sum(len(p) for p in failed_parts(task, reason, status, rows) if port.publish(p))


def _todo(
    port: ChunkPort, task: ChunkTask, roots: DataRoots | None, worn: int = 0
) -> tuple[ChunkTask, ChunkPort, list[int], int, list[str]] | None:
    """(task, port, rows no part answered, `valid`, the reasons of the split's invalid rows from `valid`), a
    split read and a dataset's port wrapped; None when nothing is left: complete, of no rows, or the job
    failed (its storage, or a split or dataset chunk started `worn` times, its `error` answer lost too)."""
    published = port.answered(task.job, task.chunk)
    if published is None:
        return None  # complete: a delivery after every part was published
    valid, reasons = len(task), []
    if task.split is not None or task.dataset is not None:
        if worn:
            port.fail_job(
                task.job,
                f"chunk {task.chunk} was started {worn} times without an answer, its `error` answer too "
                "(a worker crash, or the job's storage hangs?)",
            )
            return None
        from pipeline.engine.dataset import prepare
        from pipeline.engine.roots import OutsideRoots

        try:  # a split is read again: its rows are its lines
            prepared = prepare(port, task, roots=roots)
        except OutsideRoots as exc:
            port.fail_job(task.job, f"worker {worker_name()} {exc}")
            return None
        except StorageError as exc:
            port.fail_job(task.job, storage_failure(exc))
            return None
        task, port, valid, reasons = prepared.task, prepared.port, prepared.valid, prepared.reasons
    if not len(task):
        port.publish(empty_part(task))  # a split owning no puzzle line: complete with no record
        return None
    rows = unanswered(len(task), published)
    return (task, port, rows, valid, reasons) if rows else None


class ListPort:
    """A port that keeps the parts of one run in a list (one puzzle for the web page; tests); the base of the
    ports of the client's own processes (`client.pool`, `client.transport`): never redelivered."""

    def __init__(self) -> None:
        self.parts: list[Part] = []

    def count_delivery(self, job: str, chunk: int) -> int | None:
        return 1

    def answered(self, job: str, chunk: int) -> list[tuple[int, int]] | None:
        return sorted(run for p in self.parts if p.header.chunk == chunk for run in p.row_runs())

    def publish(self, part: Part) -> bool:
        self.parts.append(part)
        return True

    def stopped(self, job: str) -> bool:
        return False

    def fail_job(self, job: str, reason: str) -> None:
        raise RuntimeError(reason)

    def settle(self, job: str) -> None:
        """Nothing: a list's parts are charged to no job (the client's processes' ports charge theirs)."""

    def publish_generated(self, result: GenerateResult) -> None:
        self.publish(result)  # type: ignore[arg-type]
