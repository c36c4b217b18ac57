"""How chunk tasks reach a solver or a generator: local processes (embedded) or Celery workers by task name
(the client never imports `worker`), both running `pipeline.engine.runner.execute`."""

from __future__ import annotations

import functools
import queue
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import numpy as np

from client.config import ClientSettings, mask_url
from client.store import JobStore
from pipeline.contract.part import Part
from pipeline.contract.tasks import BROKER_PRIORITIES, VERSION, ChunkTask, message_priority
from pipeline.engine.gather import Meter
from pipeline.engine.runner import ListPort, execute, fail_rest, give_up
from solvers.kernel.stop import new_flag, raise_flag
from solvers.model.status import Status

if TYPE_CHECKING:
    from client.pool import LocalPool
    from pipeline.contract.generate import GenerateResult

Task = Any  # ChunkTask | GenerateTask | HelperTask (the generate module is loaded only by generate runs)

INLINE_BYTES = 8192  # an embedded job this small is solved in-process: no pool to start
RETRY_POLICY = {"max_retries": 3, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 1.0}


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


class StorePort(ListPort):
    """A task run in this process meets its job in the client's store (`pipeline.engine.runner.ChunkPort`)."""

    def __init__(self, store: JobStore, stop: np.ndarray | None = None) -> None:
        self.store = store
        self.flag = stop
        self.meter = Meter(time.thread_time_ns)  # this process does other work meanwhile: the thread's CPU

    def answered(self, job: str, chunk: int) -> list[tuple[int, int]] | None:
        return self.store.answered(job, chunk)  # type: ignore[attr-defined]

    def publish(self, part: Part | GenerateResult) -> bool:  # type: ignore[override]
        if self.flag is not None and self.flag[0]:
            return False  # stopped: an interrupted command writes nothing more
        self.store.charge(part.header.job, self.meter.take())
        return self.store.put_result(part.header.job, part)

    def settle(self, job: str) -> None:
        self.store.charge(job, self.meter.take())

    def stopped(self, job: str) -> bool:
        return bool(self.flag is not None and self.flag[0])

    def fail_job(self, job: str, reason: str) -> None:
        self.store.update(job, {"state": "failed", "error": reason[:500]})


class LocalTransport(Transport):
    """Embedded mode: chunks go to the client's LocalPool, their parts into its in-memory store (with the pool
    not started, tiny inputs are solved on a thread of this process: a one-puzzle run starts nothing)."""

    def __init__(self, store: JobStore, job: str, pool: LocalPool) -> None:
        self.store = store
        self.job = job
        self.pool = pool
        self._broken: str | None = None
        self._stop = new_flag()  # raised by `stop`: in-process solving gives up
        self._inline: queue.SimpleQueue[Task] | None = None  # tasks for the thread solving tiny inputs here
        if pool.started:  # a chunk whose process died: its unanswered rows are answered `error`
            pool.route(job, store, lambda task, reason: fail_rest(StorePort(store), task, reason))

    def send(self, task: Task) -> None:
        if not self.pool.started:  # solved in this process, on a thread of its own: `send` never waits for it
            if self._inline is None:
                self._inline = tasks = queue.SimpleQueue()
                threading.Thread(target=self._inline_loop, args=(tasks,), name="inline", daemon=True).start()
            self._inline.put(task)
            return
        future = self.pool.submit(task)
        future.add_done_callback(lambda f: self._done(task, f))

    def _inline_loop(self, tasks: queue.SimpleQueue[Task]) -> None:
        """Run the tasks sent in this process in order (a daemon: an abandoned job keeps no command alive; not
        the producer's thread: a puzzle searched for minutes would stop its beat)."""
        while True:
            task = tasks.get()
            try:
                execute(task, StorePort(self.store, self._stop))
            except Exception as exc:  # noqa: BLE001 - the job fails in one line, as a dead process fails it
                self._failed(task, exc)

    def _done(self, task: Task, future: Future[int]) -> None:
        """A crashed process fails the job; a chunk the pool cancelled unrun (the command ends) needs
        nothing."""
        if not future.cancelled() and future.exception() is not None:
            self._failed(task, future.exception())  # type: ignore[arg-type]

    def _failed(self, task: Task, exc: BaseException) -> None:
        """A task that could not be run: the job fails in one line; a solve chunk's unanswered rows are
        answered `error` behind the parts it sent."""
        where = "a local worker process" if self.pool.started else "solving in this process"
        self._broken = f"{where} failed: {type(exc).__name__}: {exc}"
        self.store.update(self.job, {"state": "failed", "error": self._broken})
        if isinstance(task, ChunkTask) and self.pool.started:
            self.pool.fail(self.job, task, self._broken)
        else:
            give_up(StorePort(self.store), task, self._broken, Status.ERROR)

    @property
    def broken(self) -> str | None:
        return self._broken

    def stop(self) -> None:
        raise_flag(self._stop)


def celery_app(url: str, settings: ClientSettings) -> Any:
    """Build a producer-only Celery app with the workers' JSON-only settings."""
    from celery import Celery

    app = Celery("sudoku_batch_client", broker=url, set_as_current=False)
    transport_options = {
        "visibility_timeout": settings.visibility_timeout,
        "socket_connect_timeout": settings.connect_timeout,
        "socket_timeout": settings.socket_timeout,
        **BROKER_PRIORITIES,
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
    """Broker mode: one Celery message per chunk at its priority (the job's class, then its chunk: one
    priority whoever sends it); a solve message is a `ChunkRef` (the worker reads the outbox), a generate one
    carries its task."""

    def __init__(
        self, url: str, settings: ClientSettings, classes: Callable[[str], str | None] = lambda job: None
    ) -> None:
        """`classes` reads a job's class from its metadata (`priority`; None: the default), once per job."""
        self.url = url
        self.settings = settings
        self.priority_of = functools.lru_cache(maxsize=1024)(classes)  # meta says it, before any send
        self.app = celery_app(url, settings)

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
                priority=message_priority(self.priority_of(task.job), task.chunk),
                **limits,
                retry=True,
                retry_policy=RETRY_POLICY,
            )
        except Exception as exc:  # noqa: BLE001 - kombu raises many kinds; all mean the same here
            raise ConnectionError(f"cannot send to broker {mask_url(self.url)}: {exc}") from None

    def _hard_limit(self, task: ChunkTask) -> int:
        """Celery's time limit for a chunk: a safety net well above the solvers' own deadlines."""
        per = task.time_limit if task.time_limit else 60.0
        # a split's puzzles: as many as its bytes hold 4x4 lines (17 bytes each)
        n = len(task) or (task.split.end - task.split.start) // 17 + 1 if task.split else len(task)
        want = max(self.settings.task_time_limit_floor, 2 * per * n + 60)
        return int(min(want, max(self.settings.task_time_limit_floor, self.settings.visibility_timeout - 60)))

    def close(self) -> None:
        self.app.close()
