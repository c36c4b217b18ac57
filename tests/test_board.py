"""One board contract (`pipeline.escalation.board.Board`), held by both of its forms: the workers'
`RedisBoard`
(Redis keys, helpers called through Celery; on fakeredis and on the real redis-server) and the local
processes' `LocalBoard` (a manager's dict). The split search's side of it too: cubes, their claims
(a lapsed hold is taken again), refutations and the shared clauses."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.escalation.task import HelperEntry, HelperTask
from solvers.model.result import SolveResult, Status

JOB = "be" * 16
GRID = "534678912672195348198342567859761423426853791713924856961537284287419635345286179"


class Form:
    """One form of the board, with what the contract cannot say itself: how helpers are seen and called,
    and how a helper's claim on a cube lapses (its holder killed: nobody refreshes it)."""

    def __init__(self, board: Any, called: Any, make_idle: Any, lapse: Any) -> None:
        self.board, self.called, self.make_idle, self.lapse = board, called, make_idle, lapse


@pytest.fixture(params=["redis", "real-redis", "local"])
def form(request, monkeypatch) -> Iterator[Form]:
    if request.param in ("redis", "real-redis"):
        tasks = pytest.importorskip("worker.board")
        from pipeline.contract.keys import JobKeys, current_key, workers_key

        client = request.getfixturevalue("fake_redis" if request.param == "redis" else "redis_client")
        calls: list[HelperTask] = []
        monkeypatch.setattr(
            tasks.app, "send_task", lambda name, kwargs, **kw: calls.append(HelperTask(**kwargs["task"]))
        )
        client.hset(JobKeys(JOB).meta, "created", "0")

        def idle(n: int) -> None:
            client.delete(workers_key(), current_key())
            for i in range(3):
                client.zadd(workers_key(), {f"host:{i}": time.time()})
            for i in range(3 - n):
                client.hset(current_key(), f"host:{i}", f"{JOB}:0")

        def lapse() -> None:
            for key in client.keys("*:hold:*"):
                client.delete(key)

        yield Form(tasks.RedisBoard(client, JOB), lambda: calls, idle, lapse)
        return
    from client.local_board import LocalBoard
    from client.pool import start_manager

    manager = start_manager()
    try:
        board = LocalBoard(manager.dict(), manager.Queue(), 3).for_job(JOB)

        def idle(n: int) -> None:
            for key in [k for k in board.state.keys() if k[0] == "busy"]:  # noqa: SIM118 - a proxy
                board.state.pop(key)
            for pid in range(3 - n):
                board.state[("busy", pid)] = True

        def called() -> list[HelperTask]:  # the queue's tasks, as the command's dispatcher takes them
            got = []
            while not board.calls.empty():
                got.append(HelperTask.model_validate_json(board.calls.get()))
            return got

        def lapse() -> None:
            for key in [k for k in board.state.keys() if k[0] == "hold"]:  # noqa: SIM118 - a proxy
                helper, _, attempt = board.state[key]
                board.state[key] = (helper, time.monotonic() - 1, attempt)

        yield Form(board, called, idle, lapse)
    finally:
        manager.shutdown()


def task(helper: int) -> HelperTask:
    return HelperTask(job=JOB, chunk=0, row=3, helper=helper, puzzle="." * 81, seed=helper)


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
    board.post(0, 3, 1, HelperEntry(state="started"))
    board.post(0, 3, 2, HelperEntry(state="started"))
    solved = SolveResult(Status.SOLVED, "." * 81, GRID, 0, "sat", nodes=7)
    board.post(0, 3, 2, HelperEntry.of(solved))
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


CUBES = [(1, 10), (1, 11), (2, 10), (2, 11)]


def test_the_first_split_published_is_the_races_and_its_units_are_shared(form):
    board = form.board
    assert board.cubes(0, 3) is None
    assert board.publish_cubes(0, 3, CUBES, [(-7,)]) == CUBES
    assert board.publish_cubes(0, 3, [(5,)], [(-8,)]) == CUBES  # a later split is not taken
    assert board.shared(0, 3, 0) == ([(-7,)], 1)
    assert board.cubes(0, 4) is None  # another puzzle's race is another race


def test_each_cube_is_claimed_once_until_its_hold_lapses_then_it_is_taken_again(form):
    board = form.board
    board.open(0, 3)
    board.publish_cubes(0, 3, CUBES, [])
    taken = [board.take_cube(0, 3, helper, len(CUBES)) for helper in (1, 2, 3, 4)]
    assert taken == [0, 1, 2, 3]
    assert board.take_cube(0, 3, 5, len(CUBES)) is None  # every cube is held
    board.hold_cube(0, 3, 1, 0)
    form.lapse()  # the helpers holding them were killed: nobody refreshes their holds
    assert board.take_cube(0, 3, 5, len(CUBES)) == 0


def test_a_refuted_cube_is_never_taken_again_and_its_clause_is_shared_with_every_search(form):
    board = form.board
    board.open(0, 3)
    board.publish_cubes(0, 3, CUBES, [(-7,)])
    assert board.take_cube(0, 3, 1, len(CUBES)) == 0
    board.refute_cube(0, 3, 0, (-1, -10))
    form.lapse()
    assert board.refuted(0, 3) == {0}
    assert board.take_cube(0, 3, 2, len(CUBES)) == 1
    clauses, at = board.shared(0, 3, 0)
    assert clauses == [(-7,), (-1, -10)] and at == 2
    assert board.shared(0, 3, at) == ([], at)
    board.drop(0, 3)
    assert board.cubes(0, 3) is None and board.refuted(0, 3) == set() and board.shared(0, 3, 0) == ([], 0)


def test_a_hostile_batch_of_clauses_on_the_board_is_refused_in_one_line_and_the_good_ones_are_read(
    form, caplog
):
    board, side = form.board, 9  # terms of a 9x9 grid: 1..729
    board.open(0, 3)
    board.push(0, 3, [(-7, 12)], 2)

    def batch(job: str, clauses: list) -> str:
        return json.dumps({"job": job, "sender": 1, "clauses": clauses})

    hostile = {
        "another job": batch("ab" * 16, [[-8]]),
        "out-of-range term": batch(JOB, [[-8], [730]]),
        "huge clause": batch(JOB, [list(range(1, 40))]),
        "not json": "[[1, 2",
        "plain list": "[[1, 2]]",
        "huge batch": batch(JOB, [[1]] * 40_000),
    }
    for raw in hostile.values():
        board._append(0, 3, raw)
    board.push(0, 3, [(5,)], 1)
    with caplog.at_level("WARNING", logger="pipeline.escalation.board"):
        clauses, at = board.shared(0, 3, 0, me=None, side=side)
    assert clauses == [(-7, 12), (5,)] and at == 2 + len(hostile)
    refused = [r.getMessage() for r in caplog.records]
    assert len(refused) == len(hostile) and all("refused" in m and "\n" not in m for m in refused)
    assert "names job" in refused[0] and "outside 1..729" in refused[1] and "39 terms" in refused[2]
    assert "bytes" in refused[-1]


def test_clause_rounds_share_short_clauses_once_and_never_hand_a_process_its_own(form):
    from pipeline.escalation.task import ROUND_TERMS, ClauseRounds
    from solvers.race.exchange import Exchange

    board = form.board
    board.open(0, 3)
    one, two = Exchange(sharing=True), Exchange(sharing=True)
    rounds1, rounds2 = ClauseRounds(board, 0, 3, 1), ClauseRounds(board, 0, 3, 2)
    one.share([(1, -2, 3), (-4,), (3, 1, -2), (900,)])  # a duplicate in another order; a term off the grid
    rounds1.round(one, 9)
    rounds2.round(two, 9)
    assert two.since(0) == [(-4,), (1, -2, 3)]  # shortest first, each once, nothing off the grid
    two.share([(-4,), (6, 7)])  # (-4,) came from helper 1: not shared back
    rounds2.round(two, 9)
    rounds1.round(one, 9)
    assert one.since(0) == [(6, 7)]  # its own clauses never come back
    one.share([tuple(range(k * 8 + 1, k * 8 + 9)) for k in range(80)])  # 640 terms: more than a round takes
    rounds1.round(one, 9)
    rounds2.round(two, 9)
    assert sum(map(len, two.since(2))) <= ROUND_TERMS and len(two.since(2)) == ROUND_TERMS // 8


def test_a_process_that_imports_no_learnt_clauses_still_imports_the_refutations_and_units(form):
    from pipeline.escalation.task import ClauseRounds
    from solvers.race.exchange import Exchange

    board = form.board
    board.open(0, 3)
    board.publish_cubes(0, 3, CUBES, [(-7,)])
    owner, helper = Exchange(sharing=True), Exchange(sharing=True)
    owner_rounds, helper_rounds = ClauseRounds(board, 0, 3, -1), ClauseRounds(board, 0, 3, 1, learnt=False)
    owner.share([(1, -2, 3)])
    owner_rounds.round(owner, 9)
    board.refute_cube(0, 3, 0, (-1, -10))
    helper.share([(4, 5)])
    helper_rounds.round(helper, 9)
    assert helper.since(0) == [(-7,), (-1, -10)]  # the owner's learnt clause is not imported
    owner_rounds.round(owner, 9)
    assert owner.since(0) == [(-7,), (-1, -10), (4, 5)]  # what it learnt is still exported
