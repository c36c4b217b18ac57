"""Local processes: the one warm process pool (`WarmPool`) of embedded `solve` and `generate` (`LocalPool`,
running `pipeline.engine.runner.execute`) and of `serve`'s single puzzles. Forked under `frozen()` (no copy
on write of the warm objects); each process dies with its parent (PR_SET_PDEATHSIG: no orphan even after a
SIGKILL) and leaves Ctrl-C, SIGTERM and SIGHUP to it; an interrupted command kills them at once (`kill`)."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import queue
import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.managers import SyncManager
from typing import TYPE_CHECKING, Any, Self

from client.ring import Ring, RingArena, RingReader, ring_bytes
from pipeline.contract.part import Part
from pipeline.engine.gather import Cost, Meter
from pipeline.engine.memory import frozen, reuse_freed_memory
from pipeline.engine.runner import ListPort, execute

if TYPE_CHECKING:
    from client.local_board import LocalBoard
    from client.store import JobStore
    from pipeline.contract.generate import GenerateResult
    from pipeline.contract.tasks import ChunkTask

log = logging.getLogger(__name__)
Task = Any  # ChunkTask | GenerateTask | HelperTask (the generate module is loaded only by generate runs)
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def die_with_parent(parent: int) -> None:
    """Pool initializer: SIGKILL this process when `parent` dies; leave interrupts to the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)  # not the parent's Python handlers, inherited by the fork
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the parent's kill_pool still applies
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def kill_pool(pool: ProcessPoolExecutor) -> None:
    """Kill the pool's processes now (work in flight is dropped) and let the executor go."""
    processes = list(getattr(pool, "_processes", {}).values())  # no public handle on them before 3.14
    for process in processes:
        with contextlib.suppress(OSError, ValueError):
            process.kill()
    for process in processes:
        with contextlib.suppress(OSError, ValueError, AssertionError):
            process.join(2.0)
    pool.shutdown(wait=False, cancel_futures=True)
    manager = getattr(pool, "_executor_manager_thread", None)  # it sees the killed processes and closes its
    if manager is not None:  # wake-up pipe: let it finish first, or at exit Python 3.11's `_python_exit` may
        manager.join(2.0)  # write to that pipe as it closes (EBADF traceback after an interrupted `solve`)


def _init(parent: int, warm: Callable[[], None], setup: Callable[..., None] | None, *args: Any) -> None:
    die_with_parent(parent)
    if setup is not None:
        setup(*args)
    warm()


def warm_all() -> None:
    """Load every compiled solver (what single puzzles of any box and kind run)."""
    from solvers.warm import warm_all

    warm_all()


def start_manager() -> SyncManager:
    """Fork the manager process of the local boards' state (`client.local_board`), dying with the command;
    before any thread exists, as the pool."""
    manager = SyncManager(ctx=multiprocessing.get_context("fork"))
    manager.start(die_with_parent, (os.getpid(),))
    return manager


class WarmPool:
    """Warm local processes that die with the caller; a pool broken by a dead process is replaced at the
    next `submit` when `replace` is set."""

    def __init__(self, processes: int, warm: Callable[[], None] = warm_all, replace: bool = True) -> None:
        self.processes = processes
        self.warm = warm
        self.replace = replace
        self._pool: ProcessPoolExecutor | None = None
        self._setup: tuple[Any, ...] = (None,)

    @property
    def started(self) -> bool:
        """True once the processes exist."""
        return self._pool is not None

    def fork(self, setup: Callable[..., None] | None = None, *args: Any) -> Self:
        """Fork every process now, from this thread, each running `setup(*args)` then `warm` as it starts."""
        self._setup = (setup, *args)
        ctx = multiprocessing.get_context("fork")
        with frozen():
            start = (os.getpid(), self.warm, *self._setup)
            pool = ProcessPoolExecutor(self.processes, mp_context=ctx, initializer=_init, initargs=start)
            pool.submit(os.getpid).result()  # forks every process now, from this thread
        self._pool = pool
        return self

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run `fn(*args)` in one of the processes (RuntimeError once the pool is closed)."""
        if self._pool is None:
            raise RuntimeError("the pool is closed")
        try:
            return self._pool.submit(fn, *args)
        except BrokenProcessPool:
            if not self.replace:
                raise
            kill_pool(self._pool)
            self.fork(*self._setup)  # the task it was running failed; the next one runs
            return self._pool.submit(fn, *args)  # type: ignore[union-attr]

    def pids(self) -> list[int]:
        """The ids of the processes (none before they are forked)."""
        return sorted(getattr(self._pool, "_processes", None) or {})

    def close(self) -> None:
        """Stop the processes (pending tasks are cancelled, running ones finish)."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.shutdown(wait=True, cancel_futures=True)

    def kill(self) -> None:
        """Kill the processes now, dropping the tasks they are running."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            kill_pool(pool)


class _QueuePort(ListPort):
    """A local process publishes its parts to the command through the pool's queue: as header and place in
    its shared ring (`arena`, `client.ring`) when rendered there, else encoded whole."""

    def __init__(self, parts: Any, arena: RingArena | None = None) -> None:
        self.parts = parts
        self.arena = arena
        self.meter = Meter()  # a local process runs one task at a time: its CPU clock is the task's

    def answered(self, job: str, chunk: int) -> list[tuple[int, int]] | None:
        return []  # a chunk goes to one local process once

    def publish(self, part: Part) -> bool:
        where = self.arena.locate(part.body) if self.arena is not None else None
        if where is not None:
            payload: Any = (self.arena.slot, *where, part.encode_head())  # type: ignore[union-attr]
        else:
            payload = part.encode()
        self.parts.put((part.header.job, payload, self.meter.take()))  # the part and its cost: one message
        return True  # stopped: the command kills its processes; failed: the task fails, and the job with it

    def publish_generated(self, result: GenerateResult) -> None:
        self.parts.put((result.header.job, result, self.meter.take()))

    def settle(self, job: str) -> None:
        self.parts.put((job, None, self.meter.take()))


_BOARD: LocalBoard | None = None  # in a local process: the board its escalations meet on (None: one process)
_PARTS: Any = None  # in a local process: the queue its parts go to the command by
_ARENA: RingArena | None = None  # in a local process: its shared ring, where its parts' records are rendered
STOP_POLL_S = 0.25  # how often a local owner or helper looks at its escalation (as workers do)


def _run(task: Task) -> int:
    """Local-process entry: `execute` the task (the model itself, pickled: no JSON dump and parse of ~1 MB);
    with a board, a chunk's slow puzzles are helped by the idle processes too."""
    port = _QueuePort(_PARTS, _ARENA)
    if _BOARD is None:
        return execute(task, port)
    board = _BOARD.for_job(task.job)
    with board.busy():
        return execute(task, port, board, poll_s=STOP_POLL_S)


def _setup(board: LocalBoard | None, parts: Any, rings: list[Ring], taken: Any) -> None:
    """A local process takes the board, the parts queue, and the first free shared ring (counter `taken`)."""
    global _BOARD, _PARTS, _ARENA
    _BOARD, _PARTS = board, parts
    with taken.get_lock():
        slot = taken.value
        taken.value += 1
    _ARENA = RingArena(rings[slot], slot) if slot < len(rings) else None


def warm_solvers() -> None:
    """Load the compiled solvers and the renderer (what solve chunks run)."""
    from pipeline.engine.solve import warm

    warm()


class LocalPool(WarmPool):
    """The embedded mode's processes, one per BatchClient, reused by its jobs: each task runs `execute`, its
    parts sent back through one queue. Forked warm (fork also spares scripts the `__main__` guard); a process
    that dies fails its job (`client.transport.LocalTransport`): the pool is not replaced."""

    def __init__(self, workers: int) -> None:
        try:
            check_workers(workers)
        except ValueError as exc:
            raise ValueError(f"workers {exc}") from None
        super().__init__(workers, warm_solvers, replace=False)
        self.workers = workers
        self._manager: SyncManager | None = None
        self._board: LocalBoard | None = None
        self._dispatching = threading.Event()
        self._parts: Any = None  # the queue local processes send their parts by
        self._readers: list[RingReader] = []  # each process's shared ring, read where its parts' records are
        self._routes: dict[str, JobStore] = {}  # job -> the store its parts go to
        self._failed: dict[str, Callable[[ChunkTask, str], None]] = {}

    def start(self, warm: Callable[[], None] = warm_solvers, races: bool = True) -> None:
        """Warm the kernels, then fork the processes (no-op when started); with `races` and more than one
        process, a board first (`client.local_board`): an idle one may help another's slow puzzle."""
        if self.started:
            return
        reuse_freed_memory()  # this process's and its children's chunk buffers are reused, not re-faulted
        self.warm = warm
        warm()
        ctx = multiprocessing.get_context("fork")
        self._parts = ctx.SimpleQueue()
        rings = [Ring(ring_bytes(self.workers)) for _ in range(self.workers)]  # shared with the processes
        self._readers = [RingReader(ring) for ring in rings]
        with frozen():  # one collection for both forks (the pool's own `frozen` finds nothing left)
            if races and self.workers > 1:
                from client.local_board import LocalBoard

                self._manager = start_manager()
                self._board = LocalBoard(self._manager.dict(), self._manager.Queue(), self.workers)
            self.fork(_setup, self._board, self._parts, rings, ctx.Value("i", 0))
        threading.Thread(target=self._receive, args=(self._parts,), name="parts", daemon=True).start()
        if self._board is not None:
            self._dispatching.set()
            threading.Thread(
                target=self._dispatch, args=(self._board,), name="escalation-calls", daemon=True
            ).start()

    def _dispatch(self, board: LocalBoard) -> None:
        """Hand the helper tasks the local owners call to the pool (a pool process cannot submit work)."""
        from pipeline.escalation.task import HelperTask

        while self._dispatching.is_set():
            try:
                text = board.calls.get(timeout=0.2)
            except queue.Empty:
                continue
            except (OSError, EOFError):  # the manager is gone: the pool is closing
                return
            if self._dispatching.is_set():
                with contextlib.suppress(RuntimeError):  # shut down meanwhile (a broken pool is one too)
                    super().submit(_run, HelperTask.model_validate_json(text))

    def route(self, job: str, store: JobStore, failed: Callable[[ChunkTask, str], None]) -> None:
        """Send `job`'s parts to `store`; `failed` answers a chunk whose process died (after its parts)."""
        self._routes[job] = store
        self._failed[job] = failed

    def fail(self, job: str, task: ChunkTask, reason: str) -> None:
        """Answer a chunk whose process died, behind whatever parts it sent (the queue keeps their order)."""
        if self._parts is not None:
            self._parts.put(("", (job, task, reason), (0, 0)))

    def _receive(self, parts: Any) -> None:
        """Hand each part the local processes publish to its job's store, as it comes."""
        while True:
            try:
                message = parts.get()
            except (OSError, EOFError):  # the pool is gone
                return
            if message is None:
                return
            job, payload, cost = message
            try:
                self._deliver(job, payload, cost)
            except Exception as exc:  # noqa: BLE001 - one job's broken part must not stop the others'
                log.error("job %s: a local part could not be stored: %s", job, exc)
            del message, payload  # nothing of a part outlives its delivery here: its ring bytes go back

    def _deliver(self, job: str, payload: Any, cost: Cost) -> None:
        """Store a local process's message and charge its cost: a part (in its ring, or whole), a generate
        result, a dead chunk, or (None) only the cost of a run's end."""
        store = self._routes.get(job)
        if store is not None:
            store.charge(job, cost)
        if payload is None:
            return
        if not job:  # a chunk whose process died: answered after its last part
            job, task, reason = payload
            failed = self._failed.get(job)
            if failed is not None:
                failed(task, reason)
            return
        if isinstance(payload, tuple):  # its records are in the process's ring (freed once dropped)
            slot, start, used, head = payload
            part = self._readers[slot].part(head, start, used)
        elif isinstance(payload, bytes):
            part = Part.decode(bytearray(payload))
        else:  # a generate chunk's result
            part = payload
        if store is not None:
            store.put_result(job, part)

    def submit(self, task: Task) -> Future[int]:  # type: ignore[override]
        """Run one task in a process; the future holds the puzzles it answered (parts come by the queue)."""
        return super().submit(_run, task)

    def close(self) -> None:
        """Stop the processes (pending chunks are cancelled, running ones finish)."""
        self._end(super().close, wake=True)

    def kill(self) -> None:
        """Kill the processes now, dropping the chunks they are solving (an interrupted command)."""
        self._end(super().kill, wake=False)

    def _end(self, stop: Callable[[], None], wake: bool) -> None:
        """Stop the helper dispatch, the processes (`stop`), the parts thread (after every part), the board's
        manager. Killed processes are not woken through the queue: one killed while sending holds its write
        lock, and a put would wait for ever (a closed stdout hung `solve` 1 time in 6)."""
        self._dispatching.clear()
        stop()
        if self._parts is not None:
            parts, self._parts = self._parts, None
            if wake:
                with contextlib.suppress(OSError):
                    parts.put(None)
        if self._manager is not None:
            manager, self._manager, self._board = self._manager, None, None
            with contextlib.suppress(Exception):  # already gone: nothing is left to stop
                manager.shutdown()


def default_workers() -> int:
    """All cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


PROCESSES_PER_CORE = 4  # more processes than this per core only add memory and switching, never speed
PROCESS_MB = 128  # memory one warm solver process may take (105 MB resident measured, with headroom)


def max_workers() -> int:
    """The most solver processes this machine can use: `PROCESSES_PER_CORE` a core, `PROCESS_MB` each."""
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
