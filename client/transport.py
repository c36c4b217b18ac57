"""How chunk tasks reach a solver or a generator: local processes (embedded) or Celery workers through Redis.

Both transports run the same functions on the far side (`pipeline.engine.runner.run_chunk`,
`pipeline.contract.generate.generate_result`) and put the result in the job store; the producer and
collector cannot tell them apart. The Celery side is reached by task name (`send_task`)
from an app built here with the workers' JSON-only settings: the client never imports
`worker`.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from client.config import ClientSettings, mask_url
from client.processes import die_with_parent, kill_pool
from client.ring import Ring, RingArena, RingReader, ring_bytes
from client.store import JobStore
from pipeline.contract.part import Part
from pipeline.contract.tasks import VERSION, ChunkTask
from pipeline.engine.memory import frozen, reuse_freed_memory
from pipeline.engine.runner import fail_rest, run_chunk
from solvers.kernel.stop import new_flag, raise_flag

if TYPE_CHECKING:
    from multiprocessing.managers import SyncManager

    from client.local_board import LocalBoard
    from pipeline.contract.generate import GenerateResult

log = logging.getLogger(__name__)

Task = Any  # ChunkTask | GenerateTask (the generate module is loaded only by generate runs)

INLINE_BYTES = 8192  # an embedded job this small is solved in-process: no pool to start


class Transport(ABC):
    """Carries chunk tasks to whatever solves them."""

    @abstractmethod
    def send(self, task: Task) -> None:
        """Hand a chunk over (may block briefly; never waits for the answer)."""

    def close(self) -> None:  # noqa: B027 - most transports hold nothing to release
        """Release processes and connections."""

    def stop(self) -> None:  # noqa: B027 - only a transport solving in this process has work to stop
        """Make work this transport runs in the calling process give up at its solvers' next slice."""

    @property
    def broken(self) -> str | None:
        """Why the transport can no longer deliver (None while healthy)."""
        return None


class StorePort:
    """A chunk run in this process meets its job in the client's store
    (`pipeline.engine.runner.ChunkPort`)."""

    def __init__(self, store: JobStore, stop: np.ndarray | None = None) -> None:
        self.store = store
        self.flag = stop

    def count_delivery(self, job: str, chunk: int) -> int | None:
        return 1  # a local run is never redelivered

    def answered(self, job: str, chunk: int) -> list[tuple[int, int]] | None:
        return self.store.answered(job, chunk)  # type: ignore[attr-defined]

    def publish(self, part: Part) -> bool:
        if self.flag is not None and self.flag[0]:
            return False  # stopped: an interrupted command writes nothing more
        return self.store.put_result(part.header.job, part)

    def stopped(self, job: str) -> bool:
        return bool(self.flag is not None and self.flag[0])

    def fail_job(self, job: str, reason: str) -> None:
        self.store.update(job, {"state": "failed", "error": reason[:500]})


class _QueuePort:
    """A chunk run in a local process publishes its parts to the command through the pool's queue: a part
    rendered into the process's shared ring (`arena`, `client.ring`) as its header and where its records
    lie, any other part encoded whole."""

    def __init__(self, parts: Any, arena: RingArena | None = None) -> None:
        self.parts = parts
        self.arena = arena

    def count_delivery(self, job: str, chunk: int) -> int | None:
        return 1

    def answered(self, job: str, chunk: int) -> list[tuple[int, int]] | None:
        return []  # a chunk goes to one local process once

    def publish(self, part: Part) -> bool:
        where = self.arena.locate(part.body) if self.arena is not None else None
        if where is not None:
            self.parts.put((part.header.job, (self.arena.slot, *where, part.encode_head())))  # type: ignore[union-attr]
        else:
            self.parts.put((part.header.job, part.encode()))
        return True

    def stopped(self, job: str) -> bool:
        return False  # the command kills its processes to stop them

    def fail_job(self, job: str, reason: str) -> None:
        raise RuntimeError(reason)  # the process's task fails: the command fails the job with it


def failed_result(task: Task, reason: str) -> GenerateResult:
    """The answer of a generate task that cannot be run at all."""
    from pipeline.contract.generate import GenerateResult

    return GenerateResult.failed(task.job, task.chunk, reason)


_BOARD: LocalBoard | None = None  # in a local process: the board its races meet on (None: one process)
_PARTS: Any = None  # in a local process: the queue its parts go to the command by
_ARENA: RingArena | None = None  # in a local process: its shared ring, where its parts' records are rendered
STOP_POLL_S = 0.25  # how often a local owner or helper looks at its race (as workers do)


def _run_payload(task: Task) -> bytes | int:
    """Worker-process entry: run a task (the validated model itself, pickled by the pool: a ChunkTask
    made by this process's producer is already valid, which skips a JSON dump and parse of ~1 MB).
    A solve chunk is run by `pipeline.engine.runner.run_chunk`, its parts sent to the command as they are
    found (the count of puzzles comes back); a generate chunk's encoded result comes back. A solve
    chunk asking for escalation races its slow puzzles on the idle local processes too."""
    if not isinstance(task, ChunkTask):
        from pipeline.contract.generate import generate_result

        if _BOARD is None:
            return generate_result(task).encode()
        with _BOARD.for_job(task.job).busy():
            return generate_result(task).encode()
    port = _QueuePort(_PARTS, _ARENA)
    if _BOARD is None:
        return run_chunk(port, task)
    board = _BOARD.for_job(task.job)
    with board.busy():
        return run_chunk(port, task, escalation=lambda t, flag: _escalation(t, board, flag))


def _escalation(task: ChunkTask, board: Any, stop: np.ndarray) -> Any:
    from pipeline.escalation.board import Escalation

    return Escalation(task, board, stop, poll_s=STOP_POLL_S)


def _run_race(text: str) -> int:
    """Worker-process entry of a helper: race a puzzle of another local process's chunk; 1 if solved here."""
    from pipeline.escalation.board import run_helper
    from pipeline.escalation.task import HelperTask

    task = HelperTask.model_validate_json(text)
    if _BOARD is None:
        return 0
    board = _BOARD.for_job(task.job)
    with board.busy():
        result = run_helper(task, board, STOP_POLL_S)
    return int(result is not None and result.status.value == "solved")


def _init_process(
    parent: int, warm: Callable[[], None], board: LocalBoard | None, parts: Any, rings: list[Ring], taken: Any
) -> None:
    """Die with the parent, leave interrupts to it, take a shared ring of its own (the first free one, by
    the shared counter `taken`), and warm the compiled kernels once per local process."""
    global _BOARD, _PARTS, _ARENA
    die_with_parent(parent)
    _BOARD, _PARTS = board, parts
    with taken.get_lock():
        slot = taken.value
        taken.value += 1
    _ARENA = RingArena(rings[slot], slot) if slot < len(rings) else None
    warm()


def warm_solvers() -> None:
    """Load the compiled solvers and the renderer (what solve chunks run)."""
    from pipeline.engine.solve import warm

    warm()


class LocalPool:
    """The embedded mode's worker processes, started once per BatchClient and reused by its jobs.

    `start()` forks the pool from the calling thread, before any producer thread exists,
    after warming the compiled solvers once so every forked process starts warm. Fork
    (not spawn) also spares scripts the `if __name__ == "__main__"` guard.
    """

    def __init__(self, workers: int) -> None:
        try:
            check_workers(workers)
        except ValueError as exc:
            raise ValueError(f"workers {exc}") from None
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self._manager: SyncManager | None = None
        self._board: LocalBoard | None = None
        self._dispatching = threading.Event()
        self._parts: Any = None  # the queue local processes send their parts by
        self._readers: list[RingReader] = []  # each process's shared ring, read where its parts' records are
        self._routes: dict[str, JobStore] = {}  # job -> the store its parts go to
        self._failed: dict[str, Callable[[ChunkTask, str], None]] = {}

    @property
    def started(self) -> bool:
        """True once the processes exist."""
        return self._pool is not None

    def start(self, warm: Callable[[], None] = warm_solvers, races: bool = True) -> None:
        """Warm the kernels the tasks will run here, then fork the worker processes (no-op when started).

        With `races` and more than one process, a board is started first (`client.local_board`):
        an idle process may race another's slow puzzle (`--escalate-after`)."""
        if self._pool is not None:
            return
        reuse_freed_memory()  # this process's and its children's chunk buffers are reused, not re-faulted
        warm()
        ctx = multiprocessing.get_context("fork")
        self._parts = ctx.SimpleQueue()
        size = ring_bytes(self.workers)
        rings = [Ring(size) for _ in range(self.workers)]  # made before the fork: shared with the processes
        self._readers = [RingReader(ring) for ring in rings]
        with frozen():  # the warm objects stay out of the children's garbage collector (no copy on write)
            if races and self.workers > 1:
                from client.local_board import LocalBoard, start_manager

                self._manager = start_manager()
                self._board = LocalBoard(self._manager.dict(), self._manager.Queue(), self.workers)
            self._pool = ProcessPoolExecutor(
                self.workers, mp_context=ctx, initializer=_init_process,
                initargs=(os.getpid(), warm, self._board, self._parts, rings, ctx.Value("i", 0)),
            )  # fmt: skip
            self._pool.submit(os.getpid).result()  # forks every process now, from this thread
        threading.Thread(target=self._receive, args=(self._parts,), name="parts", daemon=True).start()
        if self._board is not None:
            self._dispatching.set()
            threading.Thread(
                target=self._dispatch, args=(self._board,), name="race-calls", daemon=True
            ).start()

    def _dispatch(self, board: LocalBoard) -> None:
        """Hand the helper tasks the local owners call to the pool (a pool process cannot submit work)."""
        while self._dispatching.is_set():
            try:
                text = board.calls.get(timeout=0.2)
            except queue.Empty:
                continue
            except (OSError, EOFError):  # the manager is gone: the pool is closing
                return
            pool = self._pool
            if pool is not None and self._dispatching.is_set():
                with contextlib.suppress(RuntimeError):  # shut down meanwhile
                    pool.submit(_run_race, text)

    def route(self, job: str, store: JobStore, failed: Callable[[ChunkTask, str], None]) -> None:
        """Send the parts local processes publish for `job` to `store`; `failed` answers a chunk whose
        process died (called in the order of the queue: after every part it sent before it died)."""
        self._routes[job] = store
        self._failed[job] = failed

    def fail(self, job: str, task: ChunkTask, reason: str) -> None:
        """Answer a chunk whose process died, behind whatever parts it sent (the queue keeps their order)."""
        if self._parts is not None:
            self._parts.put(("", (job, task, reason)))

    def _receive(self, parts: Any) -> None:
        """Hand each part the local processes publish to its job's store, as it comes."""
        while True:
            try:
                message = parts.get()
            except (OSError, EOFError):  # the pool is gone
                return
            if message is None:
                return
            job, payload = message
            try:
                self._deliver(job, payload)
            except Exception as exc:  # noqa: BLE001 - one job's broken part must not stop the others'
                log.error("job %s: a local part could not be stored: %s", job, exc)
            del message, payload  # nothing of a part outlives its delivery here: its ring bytes go back

    def _deliver(self, job: str, payload: Any) -> None:
        """Store one message of a local process: a part (in its ring, or encoded whole), or a dead chunk."""
        if not job:  # a chunk whose process died: answered after its last part
            job, task, reason = payload
            failed = self._failed.get(job)
            if failed is not None:
                failed(task, reason)
            return
        if isinstance(payload, tuple):  # its records are in the process's ring (freed once dropped)
            slot, start, used, head = payload
            part = self._readers[slot].part(head, start, used)
        else:
            part = Part.decode(bytearray(payload))
        store = self._routes.get(job)
        if store is not None:
            store.put_result(job, part)

    def pids(self) -> list[int]:
        """The ids of the processes (none before `start`)."""
        return sorted(getattr(self._pool, "_processes", None) or {})

    def submit(self, task: Task) -> Future[bytes | int]:
        """Run one chunk task in a worker process; the future holds a generate chunk's encoded result, or
        the puzzles a solve chunk answered (its parts come through the queue as they are found)."""
        assert self._pool is not None, "start() the pool first"
        return self._pool.submit(_run_payload, task)

    def close(self) -> None:
        """Stop the processes (pending chunks are cancelled, running ones finish)."""
        self._dispatching.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._stop_receiving()
        self._stop_manager()

    def _stop_receiving(self) -> None:
        """End the thread handing parts over (after the processes: every part they sent is stored)."""
        if self._parts is not None:
            parts, self._parts = self._parts, None
            with contextlib.suppress(OSError):
                parts.put(None)

    def kill(self) -> None:
        """Kill the processes now, dropping the chunks they are solving (an interrupted command)."""
        self._dispatching.clear()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            kill_pool(pool)
        self._stop_receiving()
        self._stop_manager()

    def _stop_manager(self) -> None:
        """End the board's manager process (after the pool: its processes use it to the end)."""
        if self._manager is not None:
            manager, self._manager, self._board = self._manager, None, None
            with contextlib.suppress(Exception):  # already gone: nothing is left to stop
                manager.shutdown()


class LocalTransport(Transport):
    """Embedded mode: chunks go to the client's LocalPool, their parts into its in-memory store.

    With the pool not started (tiny inputs) chunks are solved in-process, on one thread of the
    transport's own: nothing to start up, which is what makes a one-puzzle run fast from a cold start.
    """

    def __init__(self, store: JobStore, job: str, pool: LocalPool) -> None:
        self.store = store
        self.job = job
        self.pool = pool
        self._broken: str | None = None
        self._stop = new_flag()  # raised by `stop`: in-process solving gives up
        self._inline: queue.SimpleQueue[Task] | None = None  # tasks for the thread solving tiny inputs here
        if pool.started:
            pool.route(job, store, self._fail)

    def send(self, task: Task) -> None:
        if not self.pool.started:  # solved in this process, on a thread of its own: `send` never waits for it
            if self._inline is None:
                self._inline = tasks = queue.SimpleQueue()
                loop = threading.Thread(target=self._inline_loop, args=(tasks,), name="inline", daemon=True)
                loop.start()
            self._inline.put(task)
            return
        future = self.pool.submit(task)
        future.add_done_callback(lambda f: self._done(task, f))

    def _inline_loop(self, tasks: queue.SimpleQueue[Task]) -> None:
        """Run the tasks sent in this process in order (a daemon: an abandoned job keeps no command alive)."""
        while True:
            task = tasks.get()
            try:
                self._run_inline(task)
            except Exception as exc:  # noqa: BLE001 - the job fails in one line, as a dead process fails it
                self._failed(task, exc)

    def _run_inline(self, task: Task) -> None:
        """Run a task in this process (the pool not started: a tiny input), its answers into the store. Not on
        the producer's thread: a puzzle searched for minutes would stop its beat, and collectors would take
        the submission for dead."""
        if isinstance(task, ChunkTask):
            run_chunk(StorePort(self.store, self._stop), task)
            return
        from pipeline.contract.generate import generate_result

        result = generate_result(task)
        if not self._stop[0]:
            self.store.put_result(self.job, result)

    def _done(self, task: Task, future: Future[bytes | int]) -> None:
        """A generate chunk's result is stored; a crashed process breaks the job (its chunks cannot be
        answered): a solve chunk's unanswered rows are answered `error` behind the parts it sent. A chunk the
        pool cancelled unrun (the command ends: the job failed or was interrupted) needs nothing."""
        if future.cancelled():
            return
        exc = future.exception()
        if exc is None:
            if not isinstance(task, ChunkTask) and future.result() is not None:  # a pool's encoded answer
                self.store.put_result(self.job, _decode(task, future.result()))  # type: ignore[arg-type]
            return
        self._failed(task, exc)

    def _failed(self, task: Task, exc: BaseException) -> None:
        """A task that could not be run: the job fails in one line; a solve chunk's unanswered rows are
        answered `error` behind the parts it sent."""
        where = "a local worker process" if self.pool.started else "solving in this process"
        self._broken = f"{where} failed: {type(exc).__name__}: {exc}"
        self.store.update(self.job, {"state": "failed", "error": self._broken})
        if isinstance(task, ChunkTask):
            if self.pool.started:
                self.pool.fail(self.job, task, self._broken)
            else:
                self._fail(task, self._broken)
        else:
            self.store.put_result(self.job, failed_result(task, self._broken))

    def _fail(self, task: ChunkTask, reason: str) -> None:
        fail_rest(StorePort(self.store), task, reason)

    @property
    def broken(self) -> str | None:
        return self._broken

    def stop(self) -> None:
        raise_flag(self._stop)


def _decode(task: Task, payload: bytes) -> GenerateResult:
    """A local process's encoded generate result of `task`, read back."""
    from pipeline.contract.generate import GenerateResult

    return GenerateResult.decode(payload, task.job, task.chunk)


def celery_app(url: str, settings: ClientSettings) -> Any:
    """Build a producer-only Celery app with the workers' JSON-only settings."""
    from celery import Celery

    app = Celery("sudoku_batch_client", broker=url, set_as_current=False)
    transport_options = {
        "visibility_timeout": settings.visibility_timeout,
        "socket_connect_timeout": settings.connect_timeout,
        "socket_timeout": settings.socket_timeout,
    }
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        task_ignore_result=True,
        task_default_queue=settings.queue,
        broker_transport_options=transport_options,
        broker_connection_timeout=settings.connect_timeout,
        broker_connection_retry_on_startup=False,
        broker_connection_max_retries=2,
        broker_pool_limit=2,
    )
    if url.startswith("rediss://") and "ssl_cert_reqs" not in url:
        import ssl

        app.conf.broker_use_ssl = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
    return app


class CeleryTransport(Transport):
    """Broker mode: one Celery message per chunk, sent by name to the workers' queue.

    Every task sent here was committed to the job's outbox first (producer, resend sweep,
    resume). A solve message is a `ChunkRef` (job and chunk): the worker reads the task from
    the outbox. A generate message is a few hundred bytes and carries its task.
    """

    def __init__(self, url: str, settings: ClientSettings) -> None:
        self.url = url
        self.settings = settings
        self.app = celery_app(url, settings)
        self._producer: Any = None

    def send(self, task: Task) -> None:
        if isinstance(task, ChunkTask):
            limit = self._hard_limit(task)
            payload: dict[str, Any] = {"v": VERSION, "job": task.job, "chunk": task.chunk, "ref": "outbox"}
            limits: dict[str, Any] = {"soft_time_limit": limit - 30, "time_limit": limit}
            shown = f"job={task.job} chunk={task.chunk} puzzles={len(task)}"  # what monitors show
        else:
            payload, limits = task.model_dump(mode="json"), {}
            shown = f"job={task.job} chunk={task.chunk} box={task.box} count={task.count}"
        try:
            self.app.send_task(
                task.NAME,
                kwargs={"task": payload},
                kwargsrepr=shown,
                queue=self.settings.queue,
                **limits,
                retry=True,
                retry_policy={
                    "max_retries": 3,
                    "interval_start": 0.2,
                    "interval_step": 0.5,
                    "interval_max": 1.0,
                },
            )
        except Exception as exc:  # noqa: BLE001 - kombu raises many kinds; all mean the same here
            raise ConnectionError(f"cannot send to broker {mask_url(self.url)}: {exc}") from None

    def _hard_limit(self, task: ChunkTask) -> int:
        """Celery's time limit for a chunk: a safety net well above the solvers' own deadlines."""
        per = task.time_limit if task.time_limit else 60.0
        n = (
            len(task) or (task.split.end - task.split.start) // 17 + 1 if task.split else len(task)
        )  # 4x4 lines
        want = max(self.settings.task_time_limit_floor, 2 * per * n + 60)
        return int(min(want, max(self.settings.task_time_limit_floor, self.settings.visibility_timeout - 60)))

    def close(self) -> None:
        self.app.close()


def default_workers() -> int:
    """All cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


PROCESSES_PER_CORE = 4  # more processes than this per core only add memory and switching, never speed
PROCESS_MB = 128  # memory one warm solver process may take (105 MB resident measured, with headroom)


def max_workers() -> int:
    """The most solver processes this machine can use: `PROCESSES_PER_CORE` per core, as many as its
    available memory holds (`PROCESS_MB` each), and at least one."""
    by_memory = available_mb() // PROCESS_MB
    return max(1, min(PROCESSES_PER_CORE * default_workers(), by_memory))


def available_mb() -> int:
    """Memory available for new processes (MemAvailable, MB); a large number when it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return 1 << 30


def check_workers(workers: int) -> None:
    """Raise ValueError (one line) unless `workers` local processes is between 1 and `max_workers()`."""
    if workers < 1:
        raise ValueError("must be at least 1")
    most = max_workers()
    if workers > most:
        raise ValueError(
            f"{workers} is more processes than this machine can use: at most {most} "
            f"({default_workers()} cores, {available_mb():,} MB available)"
        )
