"""One puzzle across the fleet (`--escalate-after`): the owner's escalation on a fake board, the bounds,
and the race across real worker processes on a real redis-server (one winner, the rest stop, one record)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from functools import cache

import numpy as np
import pytest
from pydantic import ValidationError

from client.local_board import LocalBoard
from pipeline.contract.tasks import ChunkTask
from pipeline.escalation.board import Escalation, run_helper
from pipeline.escalation.task import (
    MAX_HELPERS,
    EscalationEnd,
    HelperEntry,
    HelperTask,
    fold_helpers,
    helper_seed,
)
from solvers.api import STOPPED_ERROR, solve, solve_many
from solvers.kernel.stop import new_flag, raise_flag
from solvers.model.result import SolveResult, Status
from tests.conftest import (
    SAMPLE,
    check_records,
    chunk_task,
    cli_command,
    start_workers,
    stop_all,
    url_of,
    wait_until,
)

JOB = "0e" * 16
EASY = SAMPLE.read_text().splitlines()[0]


@cache
def hard_puzzle(side: int = 6) -> str:
    """A side**2 x side**2 grid with 60% of its cells blanked (seed 2). At 36x36 the race needs about
    2 s CPU and the fast path fails; at 49x49 (`slow_puzzle`) about 6 s."""
    from solvers.generate.fill import random_grids
    from solvers.model.puzzle import Box, Puzzle

    box = Box(side, side)
    rng = np.random.default_rng(2)
    grid = random_grids(box, 1, rng)[0].copy()
    grid[rng.choice(box.cells, int(0.6 * box.cells), replace=False)] = 0
    return Puzzle(box, grid.astype(np.uint8)).render()


def slow_puzzle() -> str:
    """A 49x49 grid the owner alone solves in about 6 s CPU: a helper, called after 0.2 s, is seen
    racing (and posts its work) long before the owner ends; the 36x36 one left a window of ~0.7 s,
    which a slow machine missed."""
    return hard_puzzle(7)


class MemoryBoard(LocalBoard):
    """A board in this process's memory (the seam `pipeline.escalation.board.Board`): the local board's
    split search over a plain dict, the race's life recorded (helpers called, races closed)."""

    def __init__(self, idle: int = 2) -> None:
        super().__init__({}, None, idle)
        self.job = JOB  # the job its shared clauses name
        self.leases: set[tuple[int, int]] = set()
        self.closed: set[tuple[int, int]] = set()
        self.posted: dict[tuple[int, int], dict[int, HelperEntry]] = {}
        self.called: list[HelperTask] = []

    def open(self, chunk: int, row: int) -> None:
        self.leases.add((chunk, row))

    def over(self, chunk: int, row: int) -> bool:
        return (chunk, row) in self.closed or (chunk, row) not in self.leases

    def close(self, chunk: int, row: int) -> None:
        self.closed.add((chunk, row))
        self.leases.discard((chunk, row))

    def post(self, chunk: int, row: int, helper: int, entry: HelperEntry) -> None:
        self.posted.setdefault((chunk, row), {})[helper] = entry

    def entries(self, chunk: int, row: int) -> dict[int, HelperEntry]:
        return dict(self.posted.get((chunk, row), {}))

    def drop(self, chunk: int, row: int) -> None:
        self.posted.pop((chunk, row), None)

    def idle(self) -> int:
        return self.processes

    def call(self, task: HelperTask) -> None:
        self.called.append(task)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def escalation(board: MemoryBoard, clock: Clock, after: float = 2.0) -> Escalation:
    task = chunk_task(JOB, [EASY, EASY], escalate_after=after)
    return Escalation(task, board, new_flag(), poll_s=60.0, grace_s=0.0, clock=clock)


def test_the_owners_searches_export_learnt_clauses_only_when_a_process_is_idle_as_they_start():
    for idle, sharing in ((0, False), (1, True)):
        board, clock = MemoryBoard(idle=idle), Clock()
        with escalation(board, clock).racing(0) as raced:
            assert raced.exchange.sharing is sharing


def test_a_puzzle_is_escalated_only_after_escalate_after_seconds_to_one_helper_per_idle_process():
    board, clock = MemoryBoard(idle=3), Clock()
    esc = escalation(board, clock)
    with esc.racing(1):
        clock.now += 1.9
        esc.tick()
        assert board.called == []
        clock.now += 0.2
        esc.tick()
        assert [t.helper for t in board.called] == [1, 2, 3]
        esc.tick()  # the three called have not started: no more are called
        assert len(board.called) == 3
    assert {(t.row, t.puzzle) for t in board.called} == {(1, EASY)}
    assert len({t.seed for t in board.called}) == 3
    assert (0, 1) in board.closed and esc.ends[1].winner is None


def test_the_first_verified_helper_grid_stops_the_owner_and_becomes_the_record_with_everyones_counters():
    board, clock = MemoryBoard(idle=1), Clock()
    esc = escalation(board, clock)
    helper = solve(EASY, portfolio="race", seed=5)
    with esc.racing(0) as flag:
        clock.now += 3
        esc.tick()
        board.post(0, 0, 1, HelperEntry.of(helper))
        esc.tick()
        assert flag[0] != 0  # the owner's search of this puzzle stops at its next slice
        owner = SolveResult(
            Status.TIMEOUT,
            EASY,
            error=STOPPED_ERROR,
            solver=None,
            elapsed=3.2,
            counters={"propagation": {"nodes": 9}},
        )
    record = fold_helpers(owner, esc.ends[0])
    assert record.status == Status.SOLVED and record.solution == helper.solution
    assert record.solver == f"{helper.solver}@helper1" and record.elapsed == 3.2
    assert set(record.counters) == {"propagation", *(f"{m}@helper1" for m in helper.counters)}


def test_a_chunk_the_first_pass_answers_whole_starts_no_thread_and_one_left_to_search_does():
    board = MemoryBoard(idle=1)
    task = chunk_task(JOB, [EASY, EASY], escalate_after=2.0)
    with Escalation(task, board, new_flag(), poll_s=0.05, grace_s=0.0) as esc:
        solve_many(task.texts(), racing=esc.racing)
        assert esc._poller is None and "escalation" not in {t.name for t in threading.enumerate()}
        with esc.racing(0):
            assert "escalation" in {t.name for t in threading.enumerate()}
    assert "escalation" not in {t.name for t in threading.enumerate()}


def test_a_helper_grid_the_verifier_rejects_is_never_taken():
    board, clock = MemoryBoard(idle=1), Clock()
    esc = escalation(board, clock)
    good = solve(EASY).solution
    assert good is not None
    bad = ("2" if good[0] == "1" else "1") + good[1:]
    with esc.racing(0) as flag:
        clock.now += 3
        esc.tick()
        board.post(0, 0, 1, HelperEntry(state="done", status=Status.SOLVED, solution=bad, solver="sat"))
        esc.tick()
        assert flag[0] == 0
    owner = SolveResult(Status.TIMEOUT, EASY, error="no solution within the time limit")
    assert esc.ends[0].winner is None and fold_helpers(owner, esc.ends[0]).status == Status.TIMEOUT


def race_task(text: str = EASY) -> HelperTask:
    seed = helper_seed(JOB, 0, 0, 2)
    return HelperTask(job=JOB, chunk=0, row=0, helper=2, puzzle=text, portfolio="race", seed=seed)


def test_a_helper_whose_race_is_over_before_it_starts_posts_nothing_and_solves_nothing():
    board = MemoryBoard()  # no lease: the owner finished, or died
    assert run_helper(race_task(), board, 0.05) is None
    assert board.posted == {}


def test_a_helper_that_solves_posts_its_grid_and_counters_and_closes_the_race():
    board = MemoryBoard()
    board.open(0, 0)
    result = run_helper(race_task(), board, 0.05)
    assert result is not None and result.status == Status.SOLVED
    (entry,) = board.entries(0, 0).values()
    assert entry.state == "done" and entry.solution == result.solution and entry.counters
    assert board.over(0, 0) and (0, 0) in board.closed


def test_a_helper_gives_up_and_posts_its_counters_once_the_race_is_closed():
    task = race_task(hard_puzzle())  # made before the clock runs: making it loads a compiled kernel
    board = MemoryBoard()
    board.open(0, 0)
    closer = threading.Timer(0.3, board.close, args=(0, 0))
    closer.start()
    result = run_helper(task, board, 0.05)  # the race alone takes seconds
    closer.join()
    assert result is not None and result.status in (Status.TIMEOUT, Status.APPROXIMATE)
    assert board.entries(0, 0)[2].state == "done"


def test_a_searching_helper_posts_its_counters_so_far_every_poll_before_its_last_entry():
    task = race_task(hard_puzzle())
    board, posted = MemoryBoard(), []
    board.post = lambda chunk, row, helper, entry: posted.append(entry)  # type: ignore[method-assign]
    board.open(0, 0)
    closer = threading.Timer(0.8, board.close, args=(0, 0))
    closer.start()
    run_helper(task, board, 0.05)
    closer.join()
    searching = [e for e in posted if e.state == "started" and e.counters]
    assert len(searching) >= 2 and posted[-1].state == "done"  # a poll every 0.05 s, noted every 0.25 s
    assert set(searching[-1].counters) == set(posted[-1].counters)  # every member, as the record names them


def test_a_closed_escalation_waits_only_for_a_helper_that_has_posted_no_counters_yet():
    owner = SolveResult(Status.SOLVED, EASY, solution=solve(EASY).solution, solver="sat")
    for counters, waits in (({"sat": {"conflicts": 7}}, False), ({}, True)):
        board = MemoryBoard(idle=1)
        esc = Escalation(chunk_task(JOB, [EASY], escalate_after=0.01), board, new_flag(), 60.0, grace_s=0.5)
        with esc.racing(0):
            time.sleep(0.02)
            esc.tick()
            board.post(0, 0, 1, HelperEntry(state="started", counters=counters))
            closed_at = time.monotonic()
        assert (time.monotonic() - closed_at >= 0.5) is waits
        assert ("sat@helper1" in fold_helpers(owner, esc.ends[0]).counters) is not waits


def test_the_owners_own_answer_stands_and_takes_the_helpers_counters():
    own = solve(EASY)
    entry = HelperEntry(state="done", status=Status.TIMEOUT, solver=None, counters={"sat": {"conflicts": 3}})
    record = fold_helpers(own, EscalationEnd({2: entry}))
    assert record.solution == own.solution and record.solver == own.solver
    assert record.counters["sat@helper2"] == {"conflicts": 3}


def test_the_chunks_stop_flag_stops_the_puzzle_searched_now():
    board, clock = MemoryBoard(), Clock()
    esc = escalation(board, clock)
    with esc.racing(0) as flag:
        raise_flag(esc.stop)
        esc.tick()
        assert flag[0] != 0
    assert board.called == []


def test_solve_many_enters_racing_only_for_puzzles_its_first_pass_left_unsolved():
    entered: list[int] = []

    class Stopped:
        def __init__(self, row: int) -> None:
            entered.append(row)

        def __enter__(self) -> np.ndarray:
            flag = new_flag()
            raise_flag(flag)  # as if a helper had answered: the search gives up at once
            return flag

        def __exit__(self, *exc: object) -> None:
            return None

    for portfolio in ("fast", "race"):
        entered.clear()
        results = solve_many([EASY, hard_puzzle(), EASY], portfolio=portfolio, seed=3, racing=Stopped)
        assert entered == [1]
        assert [r.status for r in results] == [Status.SOLVED, Status.TIMEOUT, Status.SOLVED]


@pytest.mark.parametrize("portfolio", ["sat", "propagation"])
def test_a_helpers_variant_still_solves_or_refutes_every_conformance_puzzle(portfolio):
    from solvers.model.parse import parse_puzzle
    from solvers.model.verify import is_solution
    from solvers.race.portfolio import race
    from tests.test_conformance import CASES

    for case in CASES:
        puzzle = parse_puzzle(case.puzzle, case.box)
        r = race(puzzle, portfolio, time_limit=10, seed=helper_seed(JOB, 0, 0, 3), variant=3)
        if case.count == 0:
            assert r.status == Status.UNSOLVABLE and r.solution is None, case.origin
            continue
        assert r.status == Status.SOLVED and r.cost == 0, case.origin
        assert is_solution(puzzle, parse_puzzle(r.solution, case.box).givens), case.origin


def test_a_variant_searches_in_another_order_than_the_owner():
    from solvers.exact import EXACT_SOLVERS
    from solvers.model.parse import parse_puzzle
    from solvers.race.members import ExactMember
    from solvers.race.portfolio import _build, parse_portfolio
    from solvers.sat.encoding import encode
    from solvers.sat.member import SAT_MODES, SatMember

    puzzle = parse_puzzle(hard_puzzle())
    seeds = np.random.SeedSequence(1)
    owner = ExactMember(EXACT_SOLVERS["propagation"], puzzle, seeds)
    helpers = [ExactMember(EXACT_SOLVERS["propagation"], puzzle, seeds, variant=k) for k in (1, 2)]
    assert owner.first_seed == 0 and len({h.first_seed for h in helpers}) == 2
    assert all(h.first_seed for h in helpers)
    for mode in SAT_MODES:  # every SAT mode: the owner numbers the literals its own way, each helper another
        spec = parse_portfolio(mode)
        orders = [[m.seed for m in _build(spec, puzzle, 0, v) if isinstance(m, SatMember)] for v in (0, 1, 2)]
        assert orders[0] == [0] and orders[1][0] and orders[2][0] and orders[1] != orders[2]
        own, other = encode(puzzle), encode(puzzle, order_seed=orders[1][0])
        assert own is not None and other is not None and own.clauses == other.clauses
        assert sorted(zip(own.cell.tolist(), own.value.tolist(), strict=True)) == sorted(
            zip(other.cell.tolist(), other.value.tolist(), strict=True)
        )  # the same literals, renumbered
        assert not np.array_equal(own.cell, other.cell) or not np.array_equal(own.value, other.value)


def test_an_older_clients_chunk_task_without_escalate_after_still_validates_and_never_escalates():
    data = chunk_task(JOB, [EASY]).model_dump(mode="json")
    del data["escalate_after"]
    assert ChunkTask.model_validate(data).escalate_after is None


@pytest.mark.parametrize(
    "change",
    [
        {"helper": 0},
        {"helper": MAX_HELPERS + 1},
        {"row": -1},
        {"puzzle": ""},
        {"puzzle": "." * (1 << 17)},
        {"time_limit": 0},
        {"seed": -1},
        {"job": "not a job"},
        {"extra": 1},
    ],
)
def test_a_race_task_out_of_bounds_is_refused(change):
    base = {"job": JOB, "chunk": 0, "row": 0, "helper": 1, "puzzle": EASY}
    HelperTask.model_validate(base)
    with pytest.raises(ValidationError):
        HelperTask.model_validate({**base, **change})


@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf"), 1e9])
def test_a_chunk_task_refuses_an_escalate_after_out_of_bounds(value):
    with pytest.raises(ValidationError):
        chunk_task(JOB, [EASY], escalate_after=value)


def test_helper_seeds_come_from_a_stable_hash_and_differ_per_helper():
    seeds = [helper_seed(JOB, 3, 7, helper) for helper in range(1, 9)]
    assert len(set(seeds)) == 8 and all(0 < s < 2**63 for s in seeds)
    assert helper_seed(JOB, 3, 7, 1) == helper_seed(JOB, 3, 7, 1)
    assert helper_seed("0a" * 16, 0, 0, 1) == 0x1CB5_5B05_9581_87C5  # the same on every machine and run


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "1e9"])
def test_escalate_after_out_of_bounds_is_a_one_line_usage_error(value, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text(EASY + "\n")
    done = subprocess.run(
        [*cli_command(), "solve", str(src), "--escalate-after", value], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--escalate-after" in done.stderr


def test_escalate_after_zero_turns_escalation_off(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text(EASY + "\n")
    done = subprocess.run(
        [*cli_command(), "solve", str(src), "--escalate-after", "0", "-q"], capture_output=True, text=True
    )
    assert done.returncode == 0 and json.loads(done.stdout)["status"] == "solved"


def test_the_api_refuses_an_escalate_after_out_of_bounds():
    from client.batch import BatchClient

    with BatchClient(None) as client, pytest.raises(ValueError, match="escalate_after"):
        client.submit([EASY], escalate_after=-1)


RACED = {"portfolio": "race", "seed": 11, "escalate_after": 0.2, "time_limit": 120}


# ---- real worker processes on a real redis-server ------------------------------------------------------


def watch_race(url: str, done: threading.Event, seen: dict[str, float]) -> None:
    """Record when a race's stop key first exists and when, after it, no worker process is busy."""
    import redis

    client = redis.Redis.from_url(url)
    while not done.is_set():
        now = time.monotonic()
        if "closed" not in seen and client.keys("sbatch:job:*:race:*:stop"):
            seen["closed"] = now
        busy = client.hvals("sbatch:current")
        if any(v.endswith(b":race") for v in busy):
            seen["helper_busy"] = now
        if "closed" in seen and "idle" not in seen and not busy:
            seen["idle"] = now
        time.sleep(0.01)
    client.close()


def test_one_puzzle_raced_on_two_real_workers_has_one_winner_the_other_stops_within_a_second(workers):
    from client.batch import BatchClient

    done, seen = threading.Event(), {}
    watcher = threading.Thread(target=watch_race, args=(workers, done, seen))
    watcher.start()
    try:
        with BatchClient(workers) as client:
            job = client.submit([slow_puzzle()], **RACED)
            records = [r.to_dict() for r in job.results()]
            job.purge()
        wait_until(lambda: "idle" in seen, 10, "both workers idle after the race closed")
    finally:
        done.set()
        watcher.join()
    check_records(records, [slow_puzzle()])
    (record,) = records
    assert record["status"] == "solved"
    helpers = [name for name in record["counters"] if name.endswith("@helper1")]
    owners = [name for name in record["counters"] if "@" not in name]
    assert helpers and owners  # the work of both processes, the loser's included
    assert "closed" in seen and "helper_busy" in seen and "idle" in seen
    assert seen["idle"] - seen["closed"] < 1.0  # the loser stopped (and the owner wrote) within a second


def test_a_job_of_one_hard_puzzle_is_raced_by_the_idle_worker_through_the_cli(workers, tmp_path):
    src, out = tmp_path / "hard.txt", tmp_path / "out.jsonl"
    src.write_text(slow_puzzle() + "\n")
    cmd = [*cli_command(), "solve", str(src), "--broker", workers, "--portfolio", "race", "-o", str(out)]
    done = subprocess.run([*cmd, "--escalate-after", "0.2", "--time-limit", "120", "-q"], capture_output=True)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    check_records(records, [slow_puzzle()])
    assert records[0]["status"] == "solved"
    assert any(name.endswith("@helper1") for name in records[0]["counters"])


def test_a_killed_racing_worker_still_leaves_exactly_one_record(redis_client, tmp_path):
    import redis

    from client.batch import BatchClient

    url = url_of(redis_client)
    procs = start_workers(url, 2, tmp_path)
    try:
        with BatchClient(url) as client:
            job = client.submit([slow_puzzle()], **RACED)
            watch = redis.Redis.from_url(url)
            deadline = time.monotonic() + 60
            helper = None
            while helper is None and time.monotonic() < deadline:
                for name, value in watch.hgetall("sbatch:current").items():
                    if value.endswith(b":race"):
                        helper = int(name.decode().rsplit(":", 1)[1])
                time.sleep(0.02)
            assert helper is not None, "no helper was called"
            os.kill(helper, signal.SIGKILL)
            records = [r.to_dict() for r in job.results()]
            job.purge()
            watch.close()
    finally:
        stop_all(procs)
    check_records(records, [slow_puzzle()])
    assert len(records) == 1 and records[0]["status"] == "solved"


def test_embedded_mode_races_a_hard_puzzle_on_its_idle_local_processes(tmp_path):
    src, out = tmp_path / "hard.txt", tmp_path / "out.jsonl"
    src.write_text(slow_puzzle() + "\n" + "\n".join([EASY] * 200) + "\n")  # big enough for the local pool
    cmd = [*cli_command(), "solve", str(src), "--portfolio", "race", "--workers", "2", "-o", str(out)]
    done = subprocess.run([*cmd, "--escalate-after", "0.2", "--time-limit", "120", "-q"], capture_output=True)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    hard = [r for r in records if r["puzzle"] == slow_puzzle()]
    assert len(records) == 201 and len(hard) == 1 and hard[0]["status"] == "solved"
    assert any(name.endswith("@helper1") for name in hard[0]["counters"])
