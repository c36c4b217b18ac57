"""Monitoring: `worker --events` lets Flower and `celery events` see every solve and generate task,
named with its job and chunk; without it workers send no events (the default costs nothing)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import SAMPLE, RedisServer, run_cli, start_workers, stop_all, wait_until

pytestmark = pytest.mark.integration


class Events:
    """Celery events on a broker, captured in a thread (what Flower and `celery events` receive)."""

    def __init__(self, url: str) -> None:
        from celery import Celery

        self.app = Celery("monitor", broker=url, set_as_current=False)
        self.seen: list[dict[str, Any]] = []
        self._receiver: Any = None
        self._thread = threading.Thread(target=self._capture, daemon=True)
        self.ready = threading.Event()  # set once the receiver consumes: a worker's events reach it from then

    def _capture(self) -> None:
        with self.app.connection() as conn:
            self._receiver = self.app.events.Receiver(conn, handlers={"*": self.seen.append})
            consume_ready = self._receiver.on_consume_ready

            def on_consume_ready(*args: Any, **kwargs: Any) -> None:
                consume_ready(*args, **kwargs)
                self.ready.set()

            self._receiver.on_consume_ready = on_consume_ready
            self._receiver.capture(limit=None, timeout=None, wakeup=False)

    def __enter__(self) -> Events:
        self._thread.start()
        assert self.ready.wait(30), "the event receiver did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._receiver is not None:
            self._receiver.should_stop = True
        self._thread.join(10)
        self.app.close()

    def wait_for(self, kind: str, timeout: float = 20.0) -> bool:
        """Wait until an event of `kind` arrived."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(e["type"] == kind for e in self.seen):
                return True
            time.sleep(0.1)
        return False

    def received(self, task: str) -> list[str]:
        """The kwargs monitors show for each task-received event of `task`."""
        return [e["kwargs"] for e in self.seen if e["type"] == "task-received" and e["name"] == task]


@pytest.fixture
def server(tmp_path: Any) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path, appendonly=False)
    server.start()
    yield server
    server.stop()


def test_a_worker_started_with_events_shows_solve_and_generate_tasks_by_job_and_chunk(server, tmp_path):
    procs = start_workers(server.url, 1, tmp_path, args=("--events",))
    try:
        with Events(server.url) as events:
            assert events.wait_for("worker-heartbeat"), "monitors see the worker as online"
            job = run_cli("submit", str(SAMPLE), "--broker", server.url).stdout.strip()
            collected = run_cli("collect", job, "--broker", server.url, "-o", str(tmp_path / "o.jsonl"))
            assert collected.returncode == 0, collected.stderr
            made = run_cli("generate", "--box", "2x2", "--count", "5", "--seed", "1", "--broker", server.url)
            assert made.returncode == 0, made.stderr
            assert events.wait_for("task-succeeded")
            assert wait_until(  # both tasks' events, the generate's (the last) to its end
                lambda: (
                    sum(e["type"] == "task-succeeded" for e in events.seen) >= 2
                    and events.received("sudoku_batch.generate_chunk")
                ),
                20,
                "events of both tasks",
            )
        assert events.received("sudoku_batch.solve_chunk") == [f"job={job} chunk=0 puzzles=306"]
        (generate,) = events.received("sudoku_batch.generate_chunk")
        assert generate.startswith("job=") and generate.endswith(" chunk=0 box=2x2 count=5")
    finally:
        stop_all(procs)


def test_a_worker_started_without_events_sends_none(server, tmp_path):
    procs = start_workers(server.url, 1, tmp_path)
    try:
        with Events(server.url) as events:  # receiving from here on
            job = run_cli("submit", str(SAMPLE), "--broker", server.url).stdout.strip()
            collected = run_cli("collect", job, "--broker", server.url, "-o", str(tmp_path / "o.jsonl"))
            assert collected.returncode == 0, collected.stderr
            time.sleep(2.5)  # longer than a worker's event heartbeat (2 s)
        assert events.seen == []
    finally:
        stop_all(procs)
