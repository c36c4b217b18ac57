"""One board contract (`pipeline.escalation.Board`), held by both of its forms: the workers' `RedisBoard`
(Redis keys, helpers called through Celery) and the local processes' `LocalBoard` (a manager's dict)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.race import RaceEntry, RaceTask
from solvers.result import SolveResult, Status

JOB = "be" * 16
GRID = "534678912672195348198342567859761423426853791713924856961537284287419635345286179"


class Form:
    """One form of the board, with what the contract cannot say itself: how helpers are seen and called."""

    def __init__(self, board: Any, called: Any, make_idle: Any) -> None:
        self.board, self.called, self.make_idle = board, called, make_idle


@pytest.fixture(params=["redis", "local"])
def form(request, fake_redis, monkeypatch) -> Iterator[Form]:
    if request.param == "redis":
        tasks = pytest.importorskip("worker.board")
        from pipeline.keys import JobKeys, current_key, workers_key

        calls: list[RaceTask] = []
        monkeypatch.setattr(
            tasks.app, "send_task", lambda name, kwargs, **kw: calls.append(RaceTask(**kwargs["task"]))
        )
        fake_redis.hset(JobKeys(JOB).meta, "created", "0")

        def idle(n: int) -> None:
            fake_redis.delete(workers_key(), current_key())
            for i in range(3):
                fake_redis.zadd(workers_key(), {f"host:{i}": time.time()})
            for i in range(3 - n):
                fake_redis.hset(current_key(), f"host:{i}", f"{JOB}:0")

        yield Form(tasks.RedisBoard(fake_redis, JOB), lambda: calls, idle)
        return
    from client.local_board import LocalBoard, start_manager

    manager = start_manager()
    try:
        board = LocalBoard(manager.dict(), manager.Queue(), 3).for_job(JOB)

        def idle(n: int) -> None:
            for key in [k for k in board.state.keys() if k[0] == "busy"]:  # noqa: SIM118 - a proxy
                board.state.pop(key)
            for pid in range(3 - n):
                board.state[("busy", pid)] = True

        def called() -> list[RaceTask]:  # the queue's tasks, as the command's dispatcher takes them
            got = []
            while not board.calls.empty():
                got.append(RaceTask.model_validate_json(board.calls.get()))
            return got

        yield Form(board, called, idle)
    finally:
        manager.shutdown()


def task(helper: int) -> RaceTask:
    return RaceTask(job=JOB, chunk=0, row=3, helper=helper, puzzle="." * 81, seed=helper)


def test_a_race_is_open_while_its_lease_lives_and_over_once_closed(form):
    board = form.board
    assert board.over(0, 3)  # never opened: no lease, helpers do not start
    board.open(0, 3)
    assert not board.over(0, 3)
    board.close(0, 3)
    assert board.over(0, 3)


def test_helpers_entries_are_read_back_last_one_each_and_dropped_with_the_race(form):
    board = form.board
    board.open(0, 3)
    board.post(0, 3, 1, RaceEntry(state="started"))
    board.post(0, 3, 2, RaceEntry(state="started"))
    solved = SolveResult(Status.SOLVED, "." * 81, GRID, 0, "sat", nodes=7)
    board.post(0, 3, 2, RaceEntry.of(solved))
    entries = board.entries(0, 3)
    assert sorted(entries) == [1, 2] and entries[1].state == "started"
    assert entries[2].state == "done" and entries[2].solution == GRID and entries[2].nodes == 7
    assert board.entries(0, 4) == {}  # another puzzle's race is another race
    board.drop(0, 3)
    assert board.entries(0, 3) == {}


def test_idle_processes_are_counted_and_called_helpers_are_handed_over(form):
    form.make_idle(2)
    assert form.board.idle() == 2
    form.make_idle(0)
    assert form.board.idle() == 0
    for helper in (1, 2):
        form.board.call(task(helper))
    called = form.called()
    assert [t.helper for t in called] == [1, 2] and all(t.job == JOB for t in called)
