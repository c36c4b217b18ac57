"""One puzzle's search split between the processes racing it (`solvers.race.cubes`, `solvers.race.exchange`):
the split,
the SAT member's cubes and imported clauses, the owner's verdict, and the split race on two real workers
(the board's side of it, in every form, is in tests/test_board.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from functools import cache
from typing import Any

import numpy as np
import pytest

from solvers.model.parse import parse_puzzle
from solvers.model.puzzle import Puzzle
from solvers.race.cubes import (
    MAX_CUBES,
    Cubes,
    cell_value,
    make_cubes,
    negation,
    term,
    valid_clause,
    valid_cube,
)
from solvers.race.exchange import Exchange

JOB = "5c" * 16


@cache
def holed(side: int = 6, seed: int = 3, holes: float = 0.6) -> str:
    """A side**2 x side**2 grid with `holes` of its cells blanked (solvable: cut from a full grid); the
    default, 36x36, takes the race ~430 SAT conflicts (0.3 s): past the fast path, not long."""
    from solvers.generate.fill import random_grids
    from solvers.model.puzzle import Box

    box = Box(side, side)
    rng = np.random.default_rng(seed)
    grid = random_grids(box, 1, rng)[0].copy()
    grid[rng.choice(box.cells, int(holes * box.cells), replace=False)] = 0
    return Puzzle(box, grid.astype(np.uint8)).render()


def solution_of(text: str) -> np.ndarray:
    from solvers.api import solve

    result = solve(text, portfolio="race", seed=1)
    assert result.solution is not None
    return parse_puzzle(result.solution).givens


class ListCubes:
    """A `CubeSource` in this process: cubes claimed in order, refutations recorded."""

    def __init__(self) -> None:
        self.cubes: list | None = None
        self.units: list = []
        self.held: list[int] = []
        self.refutations: dict[int, tuple] = {}

    def published(self) -> list | None:
        return self.cubes

    def publish(self, made: Cubes) -> list:
        if self.cubes is None:
            self.cubes, self.units = list(made.cubes), list(made.units)
        return self.cubes

    def take(self) -> int | None:
        for index in range(len(self.cubes or [])):
            if index not in self.held and index not in self.refutations:
                self.held.append(index)
                return index
        return None

    def refute(self, index: int, clause: tuple) -> None:
        self.refutations[index] = clause


def test_a_term_names_a_cell_and_value_whatever_the_grid_and_reads_back():
    for n in (4, 9, 25, 64):
        for cell, value in ((0, 1), (n * n - 1, n), (n + 2, 2)):
            t = term(cell, value, n)
            assert 1 <= t <= n**3 and cell_value(t, n) == (cell, value) == cell_value(-t, n)
    assert negation((5, 9)) == (-5, -9)


@pytest.mark.parametrize(
    ("clause", "ok"),
    [
        ((1, -2), True),
        ((0,), False),
        ((), False),
        ((126,), False),
        ((1.0,), False),
        ([3], True),
        ("12", False),
    ],
)
def test_a_clause_from_another_process_is_checked_against_the_grid(clause, ok):
    assert valid_clause(clause, 5) is ok


def test_a_cube_fixes_distinct_cells_to_values():
    n = 9
    assert valid_cube((term(3, 1, n), term(4, 1, n)), n)
    assert not valid_cube((term(3, 1, n), term(3, 2, n)), n)  # one cell, two values
    assert not valid_cube((-term(3, 1, n),), n)


def test_a_split_covers_every_candidate_of_its_cells_and_its_units_hold_in_the_solution():
    text = holed()
    puzzle = parse_puzzle(text)
    solved = solution_of(text)
    n = puzzle.box.n
    made = make_cubes(puzzle, want=6)
    assert 6 <= len(made.cubes) <= MAX_CUBES
    cells = sorted({cell_value(t, n)[0] for t in made.cubes[0]})
    assert all(sorted(cell_value(t, n)[0] for t in c) == cells for c in made.cubes)
    assert len(set(made.cubes)) == len(made.cubes)
    holding = [c for c in made.cubes if all(solved[cell_value(t, n)[0]] == cell_value(t, n)[1] for t in c)]
    assert len(holding) == 1  # the solution is in exactly one cube
    for (t,) in made.units:  # a refuted candidate is in no solution
        cell, value = cell_value(t, n)
        assert t < 0 and solved[cell] != value
    assert make_cubes(puzzle, want=6) == made  # the same on every machine


def test_a_puzzle_propagation_settles_has_no_cubes():
    from solvers.api import solve

    easy = solve(holed(holes=0.2)).solution
    assert easy is not None
    assert make_cubes(parse_puzzle(easy), want=4).cubes == ()


def sat_member(text: str, mode: str, exchange: Exchange | None = None, seed: int = 0) -> Any:
    """A SAT member of `mode` with its CNF built and loaded, not searched yet (its first step builds it)."""
    from solvers.sat.member import SAT_MODES, SatMember

    member = SatMember(parse_puzzle(text), mode=SAT_MODES[mode], exchange=exchange, seed=seed)
    member.step(0, np.zeros(1, dtype=np.int64))
    for block in member.search.loading:
        member.search.load(block)
    member.search.loading = None
    return member


def test_a_clause_shared_in_terms_is_imported_in_the_importers_own_literal_order(monkeypatch):
    from solvers.sat import member as sat

    monkeypatch.setattr(
        sat, "load_backend", lambda: None
    )  # python-sat's solver: it can propagate assumptions
    text = holed()
    solved = solution_of(text)
    n = parse_puzzle(text).box.n
    exchange = Exchange()
    owner = sat_member(text, "sat", exchange)  # fewest candidates first
    helper = sat_member(text, "sat-rows", seed=12345)  # cell by cell, renumbered
    cell = next(c for c in range(n * n) if not owner.search.cnf.fixed[c])
    lits = helper.search.lits
    wrong = next(v for v in range(1, n + 1) if v != solved[cell] and lits((term(cell, v, n),), n))
    clause = helper.search.terms(lits((-term(cell, wrong, n),), n), n)  # the helper's literal, back to a term
    assert clause == (-term(cell, wrong, n),)
    exchange.offer([clause])
    owner._trade(owner.search)  # what its next step does first
    assert owner.imported == 1
    (lit,) = owner.search.lits((term(cell, wrong, n),), n)
    assert lit != helper.search.lits((term(cell, wrong, n),), n)[0]  # another numbering ...
    ok, _ = owner.search.solver.propagate(assumptions=[lit])
    assert not ok  # ... and the owner now knows the cell does not hold that value


def test_a_helper_member_searches_cubes_refutes_the_wrong_ones_and_finds_the_solution_in_its_cube():
    from solvers.race.portfolio import race

    text = holed()
    source = ListCubes()
    result = race(parse_puzzle(text), "race", seed=3, variant=2, exchange=Exchange(source, want=4))
    assert result.status.value == "solved"
    n = parse_puzzle(text).box.n
    assert source.cubes and len(source.cubes) >= 4
    winner = source.held[-1]  # the cube searched when the solution came
    solved = parse_puzzle(result.solution).givens
    assert all(solved[cell_value(t, n)[0]] == cell_value(t, n)[1] for t in source.cubes[winner])
    for index, clause in source.refutations.items():  # each refutation: the cube's terms (or some), negated
        assert set(clause) <= set(negation(source.cubes[index])) and clause
    sat = [c for c in result.counters.values() if "cubes_refuted" in c]
    assert sat and sum(c["cubes_refuted"] for c in sat) == len(source.refutations)


def needs_share() -> Any:
    """The compiled CaDiCaL that exports learnt clauses (`share/`): CI installs it, so there it must load."""
    import os

    if os.environ.get("CI") == "true":
        import cadical_share  # type: ignore[import-not-found]

        return cadical_share
    return pytest.importorskip("cadical_share")


def frisch(index: int) -> str:
    """Puzzle `index` of gecode's frisch 25x25 set (one solution each; #12: ~0.5 s of SAT, #3: ~3 s)."""
    from tests.conftest import corpus_file

    return corpus_file("25x25/gecode_frisch_25x25.txt").read_text().split()[index]


def holds(clause: tuple, grid: np.ndarray, n: int) -> bool:
    """True when the grid makes one term of the clause true."""
    return any((grid[cell_value(t, n)[0]] == cell_value(t, n)[1]) == (t > 0) for t in clause)


def run_member(member: Any, exchange: Exchange, steps: int = 20_000) -> list[tuple[int | None, tuple]]:
    """Step a member to its end; each clause it shared, with the cube its search held then."""
    shared = []
    for _ in range(steps):
        searching = member.search.cube if member.search is not None else None
        outcome = member.step(0, np.zeros(1, dtype=np.int64))
        shared += [(searching, c) for c in exchange.take()]
        if member.status != "running" or outcome.name in ("SOLVED", "DONE"):
            break
    return shared


def test_a_helpers_sat_member_shares_short_learnt_clauses_that_every_solution_satisfies():
    from solvers.sat.member import LEARNT_MAX_LITERALS, SAT_MODES, SatMember

    needs_share()
    text = frisch(12)
    solved, n = solution_of(text), 25
    exchange = Exchange(sharing=True)
    member = SatMember(parse_puzzle(text), mode=SAT_MODES["sat-rows"], exchange=exchange, seed=99)
    shared = run_member(member, exchange)
    assert member.status == "solved" and shared and member.counters()["exported"] == len(shared)
    assert all(0 < len(c) <= LEARNT_MAX_LITERALS and valid_clause(c, n) for _, c in shared)
    assert all(holds(c, solved, n) for _, c in shared)  # implied by the puzzle: true in its solution


def test_without_the_compiled_cadical_a_sharing_race_searches_as_before_and_says_so_once(monkeypatch, caplog):
    import sys

    from solvers.sat import member as sat

    monkeypatch.setitem(sys.modules, "cadical_share", None)  # `import cadical_share` raises ImportError
    sat.share_backend.cache_clear()
    sat._compiled.cache_clear()
    try:
        text = frisch(12)
        with caplog.at_level("WARNING", logger="solvers.sat.member"):
            for seed in (99, 7):
                exchange = Exchange(sharing=True)
                member = sat.SatMember(
                    parse_puzzle(text), mode=sat.SAT_MODES["sat-rows"], exchange=exchange, seed=seed
                )
                assert run_member(member, exchange) == [] and member.status == "solved"
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1 and "cannot share learnt clauses" in said[0]
    finally:
        sat.share_backend.cache_clear()
        sat._compiled.cache_clear()


def steps_of(member: Any, steps: int) -> dict[str, int]:
    """Step a member `steps` times (or to its end); its solver's counters."""
    for _ in range(steps):
        member.step(0, np.zeros(1, dtype=np.int64))
        if member.status != "running":
            break
    return {k: member.stats.get(k, 0) for k in ("conflicts", "decisions")}


def test_a_search_the_compiled_cadical_loads_in_blocks_searches_exactly_as_python_sats(monkeypatch):
    from solvers.sat import member as sat

    needs_share()
    puzzle = parse_puzzle(frisch(3))
    fast = sat.SatMember(puzzle, mode=sat.SAT_MODES["sat-plain"])
    steps_of(fast, 2)
    assert fast.whole is not None and fast.whole.flat
    counted = steps_of(fast, 60)
    monkeypatch.setattr(sat, "load_backend", lambda: None)
    slow = sat.SatMember(puzzle, mode=sat.SAT_MODES["sat-plain"])
    steps_of(slow, 2)
    assert slow.whole is not None and not slow.whole.flat
    assert steps_of(slow, 60) == counted and counted["conflicts"] > 1_000 and counted["decisions"] > 0


def test_a_compiled_cadical_of_another_version_than_python_sats_does_not_replace_it(monkeypatch):
    from solvers.sat import member as sat

    backend = needs_share()
    monkeypatch.setattr(backend, "CADICAL_VERSION", "1.5.3")
    member = sat.SatMember(parse_puzzle(frisch(12)), mode=sat.SAT_MODES["sat"])
    steps_of(member, 2)
    assert sat.load_backend() is None and member.whole is not None and not member.whole.flat


@pytest.mark.parametrize(
    ("block", "why"),
    [([1, 2], "not closed by a 0"), ([1, 11, 0], "at most max_var"), ([-(2**31), 0], "at most max_var")],
)
def test_the_compiled_cadical_refuses_a_block_with_an_open_clause_or_a_literal_beyond_its_variables(
    block, why
):
    backend = needs_share()
    search = backend.Search(0, 1 << 16, 10)
    with pytest.raises(ValueError, match=why):
        search.add_flat(np.array(block, dtype=np.int32))
    search.add_flat(np.array([1, 2, 0, -1, 0], dtype=np.int32))
    assert search.solve_limited() is True and search.get_model()[:2] == [-1, 2]


class LastFirst(ListCubes):
    """Cubes claimed from the last one back."""

    def take(self) -> int | None:
        for index in reversed(range(len(self.cubes or []))):
            if index not in self.held and index not in self.refutations:
                self.held.append(index)
                return index
        return None


def test_a_clause_learnt_under_a_cube_is_shared_only_with_the_cubes_negation_so_it_holds_everywhere():
    from solvers.sat.member import SAT_MODES, SatMember

    needs_share()
    text = frisch(12)
    solved, n = solution_of(text), 25
    source = LastFirst()  # the solution's cube, usually the first (least constraining), comes last
    exchange = Exchange(source, want=4, sharing=True)
    member = SatMember(parse_puzzle(text), mode=SAT_MODES["sat-plain"], exchange=exchange)
    shared = run_member(member, exchange)
    assert member.status == "solved" and source.refutations  # cubes searched and refuted
    under = [(cube, c) for cube, c in shared if cube is not None]
    assert under
    for cube, clause in under:
        unless = negation(source.cubes[cube])
        assert clause[-len(unless) :] == unless and holds(clause, solved, n)


def test_a_member_importing_every_refuted_cube_of_a_split_proves_there_is_no_solution():
    text = holed()
    puzzle = parse_puzzle(text)
    made = make_cubes(puzzle, want=4)
    exchange = Exchange()
    member = sat_member(text, "sat-plain", exchange)
    exchange.offer([negation(c) for c in made.cubes])  # every part refuted: no grid is left
    member.step(0, np.zeros(1, dtype=np.int64))
    assert member.status == "unsolvable" and member.imported == len(made.cubes)


def test_the_owner_takes_unsolvable_only_once_every_cube_is_refuted_and_shares_the_refutations():
    from pipeline.escalation.task import fold_helpers
    from solvers.api import STOPPED_ERROR
    from solvers.model.result import SolveResult, Status
    from tests.test_escalation import EASY, Clock, MemoryBoard, escalation

    board, clock = MemoryBoard(idle=2), Clock()
    esc = escalation(board, clock)
    with esc.racing(0) as raced:
        clock.now += 3
        esc.tick()  # two helpers called
        board.publish_cubes(0, 0, [(1,), (2,)], [(-3,)])
        board.refute_cube(0, 0, 0, (-1,))
        esc.tick()
        assert raced.flag[0] == 0 and raced.exchange.since(0) == [(-3,), (-1,)]  # for the owner's SAT members
        board.refute_cube(0, 0, 1, (-2,))
        esc.tick()
        assert raced.flag[0] != 0  # the owner's search stops: there is nothing left to find
    owner = SolveResult(Status.TIMEOUT, EASY, error=STOPPED_ERROR)
    record = fold_helpers(owner, esc.ends[0])
    assert record.status == Status.UNSOLVABLE and record.solver == "split"


# ---- real worker processes on a real redis-server --------------------------------------------------------
# The test plays the chunk's owner: the real `Escalation` on the real board calls the helpers (two real
# worker processes), but searches nothing itself, so only the helpers' parts of the search decide.


@cache
def unsolvable() -> str:
    """A 36x36 grid with no solution: `holed(6, 1, 0.47)` with cell 1277 set to 4. Root propagation does
    not refute it; the race proves it in ~0.6 s CPU; its split is 3 cubes."""
    from solvers.exact.propagation import root_candidates

    puzzle = parse_puzzle(holed(6, 1, 0.47))
    givens = puzzle.givens.copy()
    givens[1277] = 4
    assert root_candidates(puzzle.box, givens) is not None
    return Puzzle(puzzle.box, givens).render()


class OwnerBoard:
    """The workers' Redis board, its helper tasks sent from this test (the owner) to the real workers;
    `after_the_split`: that helper's task is sent only once the split is published (at most 20 s on)."""

    def __new__(cls, client: Any, url: str, job: str = JOB, after_the_split: int | None = None) -> Any:
        import threading

        from celery import Celery

        from worker.board import RedisBoard
        from worker.config import settings

        class Board(RedisBoard):
            app = Celery("owner", broker=url, set_as_current=False)

            def call(self, task: Any) -> None:
                if task.helper == after_the_split:
                    threading.Thread(target=self._call_once_split, args=(task,), daemon=True).start()
                    return
                kwargs = {"task": task.model_dump(mode="json")}
                self.app.send_task(task.NAME, kwargs=kwargs, queue=settings.queue)

            def _call_once_split(self, task: Any) -> None:
                deadline = time.monotonic() + 20
                while self.cubes(task.chunk, task.row) is None and time.monotonic() < deadline:
                    time.sleep(0.02)
                kwargs = {"task": task.model_dump(mode="json")}
                self.app.send_task(task.NAME, kwargs=kwargs, queue=settings.queue)

        return Board(client, job)


def watch_holds(client: Any, done: Any, holders: dict[int, list[str]]) -> None:
    """Record, for each cube, the helpers that held it, in order."""
    while not done.is_set():
        for key in client.keys(f"sbatch:job:{JOB}:race:0:0:hold:*"):
            value = client.get(key)
            index = int(key.decode().rsplit(":", 1)[1])
            if value is not None and holders.setdefault(index, [])[-1:] != [value.decode()]:
                holders[index].append(value.decode())
        time.sleep(0.01)


def race_as_owner(
    client: Any, text: str, during: Any = None, job: str = JOB, after_the_split: int | None = None
) -> tuple[Any, Any]:
    """Escalate a chunk of one puzzle at once to the idle workers and wait for the helpers' answer; the
    record (`fold_helpers` of an owner that found nothing) and the outcome. `during(client)` runs every
    poll; `after_the_split`: that helper is called once the split is published (`OwnerBoard`)."""
    from pipeline.contract.keys import JobKeys
    from pipeline.escalation.board import Escalation
    from pipeline.escalation.task import fold_helpers
    from solvers.api import STOPPED_ERROR
    from solvers.kernel.stop import new_flag
    from solvers.model.result import SolveResult, Status
    from tests.conftest import chunk_task, url_of

    client.hset(JobKeys(job).meta, mapping={"created": str(time.time()), "state": "producing"})
    task = chunk_task(job, [text], escalate_after=0.01, portfolio="race", time_limit=120)
    board = OwnerBoard(client, url_of(client), job, after_the_split)
    with Escalation(task, board, new_flag(), poll_s=0.1) as esc, esc.racing(0) as raced:
        deadline = time.monotonic() + 120
        while not raced.flag[0] and time.monotonic() < deadline:
            if during is not None:
                during(client)
            time.sleep(0.05)
    owner = SolveResult(Status.TIMEOUT, text, error=STOPPED_ERROR)
    return fold_helpers(owner, esc.ends[0]), esc.ends[0]


@pytest.fixture
def two_workers(redis_client, tmp_path) -> Iterator[Any]:
    """Two real `sudoku-batch worker --concurrency 1` processes on the test's own database."""
    from tests.conftest import start_workers, stop_all, url_of

    procs = start_workers(url_of(redis_client), 2, tmp_path)
    try:
        yield redis_client
    finally:
        stop_all(procs)


SHARED_DB = 2  # the module's shared pair's database: neither the session's workers' (0) nor a test's own (1)


@pytest.fixture(scope="module")
def shared_pair(redis_url, tmp_path_factory) -> Iterator[Any]:
    """Two real workers, as `two_workers`, shared by the module's tests that kill none of them, on a database
    of their own (flushed before and after: its queue bindings live as long as the workers)."""
    import redis

    from tests.conftest import start_workers, stop_all, url_of

    client = redis.Redis.from_url(f"{redis_url.rsplit('/', 1)[0]}/{SHARED_DB}")
    client.flushdb()
    procs = start_workers(url_of(client), 2, tmp_path_factory.mktemp("split-workers"))
    try:
        yield client
    finally:
        stop_all(procs)
        client.flushdb()
        client.close()


@pytest.fixture
def two_idle_workers(shared_pair) -> Iterator[Any]:
    """The module's shared pair, idle (no task running, queued or taken), with no job key of an earlier
    test (dropped before and after)."""
    from pipeline.contract.keys import queued
    from tests.conftest import wait_until

    def idle() -> bool:
        r = shared_pair
        return not (r.hlen("sbatch:current") or queued(r, "sudoku_batch") or r.hlen("unacked"))

    def clean() -> None:
        wait_until(idle, 60, "the shared workers idle")
        for key in shared_pair.scan_iter("sbatch:job:*"):
            shared_pair.delete(key)

    clean()
    yield shared_pair
    clean()


def helper_members(outcome: Any) -> dict[str, dict[str, Any]]:
    """Every helper's SAT members' counters, by `member@helperK`."""
    return {
        f"{m}@helper{k}": c
        for k, e in outcome.entries.items()
        for m, c in e.counters.items()
        if "imported" in c
    }


def test_a_split_race_refuting_every_cube_on_two_real_workers_is_unsolvable(two_idle_workers):
    record, outcome = race_as_owner(two_idle_workers, unsolvable())
    assert record.status.value == "unsolvable"
    members = helper_members(outcome)
    assert {name.split("@")[1] for name in members} == {"helper1", "helper2"}
    assert all(c["cubes_refuted"] >= 1 for c in members.values())  # both workers refuted cubes
    (cubes,) = {c["cubes"] for c in members.values()}
    refuted = sum(c["cubes_refuted"] for c in members.values())
    # a cube whose hold lapsed (a helper's step past the 3 s lease on a loaded machine) is taken again and
    # may be refuted twice: the counters count refutations, the verdict needs every cube refuted once
    if record.solver == "split":  # every cube refuted
        assert refuted >= cubes
    else:  # the last cubes: a helper left without one proved the rest, importing the others' refutations
        prover = members[record.solver]
        assert prover["imported"] >= 1


def test_a_clause_one_helper_refutes_is_imported_by_a_helper_with_another_literal_order(
    two_idle_workers, monkeypatch
):
    import pipeline.escalation.board as escalation

    monkeypatch.setattr(escalation, "helper_cubes", lambda n, helper, helpers=None: 0 if helper == 1 else 2)
    imports = []
    for attempt in range(3):  # one helper may end the race before the other has a clause to import: again
        job = JOB if attempt == 0 else f"{attempt}{JOB[1:]}"
        # helper 1 proves the whole puzzle in ~0.6 s while helper 2 first splits it: called at once, on a
        # loaded machine it ended all three races first (CI), so it is called once the split is published
        record, outcome = race_as_owner(two_idle_workers, unsolvable(), job=job, after_the_split=1)
        assert record.status.value == "unsolvable"
        members = helper_members(outcome)
        (cubes,) = [name for name in members if name.endswith("@helper2")]  # cubes, in the owner's `sat`
        whole = [name for name in members if name.endswith("@helper1")]  # the whole puzzle, `sat-rows`
        assert cubes.split("@")[0] == "sat" and all(w.split("@")[0] == "sat-rows" for w in whole)
        imports.append((members[cubes]["cubes_refuted"], sum(members[w]["imported"] for w in whole)))
        if imports[-1][0] >= 1 and imports[-1][1] >= 1:
            break
    assert imports[-1][0] >= 1 and imports[-1][1] >= 1, (
        f"(cubes refuted, clauses imported) per race: {imports}"
    )


def test_a_helper_killed_mid_cube_leaves_its_cube_to_be_taken_again_once_its_hold_lapses(two_workers):
    """The test holds the race's lease itself and sends the helper tasks (so it chooses when), to two
    real workers: helper 1 takes cube 0 and is killed (SIGKILL) searching it; once its hold lapses,
    helper 2 takes cube 0 again."""
    import os
    import signal
    import threading

    from pipeline.contract.keys import JobKeys
    from pipeline.escalation.task import HelperTask, helper_seed
    from tests.conftest import url_of
    from tests.test_escalation import slow_puzzle

    client = two_workers
    client.hset(JobKeys(JOB).meta, mapping={"created": str(time.time()), "state": "producing"})
    board = OwnerBoard(client, url_of(client))
    done, holders = threading.Event(), {}
    watcher = threading.Thread(target=watch_holds, args=(client, done, holders))
    watcher.start()

    def helper(k: int) -> HelperTask:
        seed = helper_seed(JOB, 0, 0, k)
        return HelperTask(
            job=JOB, chunk=0, row=0, helper=k, puzzle=slow_puzzle(), portfolio="race", seed=seed, cubes=2
        )

    def until(condition: Any, what: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            board.open(0, 0)  # the owner's lease: the helpers race while it holds
            assert time.monotonic() < deadline, what
            time.sleep(0.02)

    try:
        board.open(0, 0)
        board.call(helper(1))
        until(lambda: holders.get(0) == ["1"], "helper 1 took no cube")
        (pid,) = [
            int(name.decode().rsplit(":", 1)[1])
            for name, value in client.hgetall("sbatch:current").items()
            if value.endswith(b":race")
        ]
        os.kill(pid, signal.SIGKILL)
        hold = board.keys.escalation(0, 0).hold(0)
        until(lambda: not client.exists(hold), "the dead helper's hold never lapsed")
        board.call(helper(2))
        until(lambda: holders.get(0) == ["1", "2"], "cube 0 was not taken again")
    finally:
        board.close(0, 0)
        done.set()
        watcher.join()
    assert holders[0] == ["1", "2"]


def test_learnt_clauses_one_helper_shares_are_imported_by_another_in_its_own_literal_order(
    two_idle_workers, monkeypatch
):
    """Helper 1 searches the whole puzzle (`sat-plain-fewest`: fewest-candidates order) and exports its learnt
    clauses, helper 2 its cubes (the owner's `sat-plain`: cell by cell, each cube's CNF numbered afresh):
    helper 2 imports more clauses than the split's units and the cube refutations there are, so learnt
    clauses of the others'; helper 1, racing another mode on the whole puzzle, imports none of them; the
    grid the race returns is the verified one."""
    import pipeline.escalation.board as escalation
    from solvers.model.verify import is_solution

    needs_share()
    monkeypatch.setattr(escalation, "helper_cubes", lambda n, helper, helpers=None: 0 if helper == 1 else 2)
    text = frisch(3)  # 25x25: where searches share (`solvers.sat.member.SHARING_SIDES`)
    units = len(make_cubes(parse_puzzle(text), want=2).units)
    record, outcome = race_as_owner(two_idle_workers, text)
    assert record.status.value == "solved"
    assert is_solution(parse_puzzle(text), parse_puzzle(record.solution).givens)
    members = helper_members(outcome)
    (whole,) = [c for name, c in members.items() if name.endswith("@helper1")]
    (cubes,) = [c for name, c in members.items() if name.endswith("@helper2")]
    assert whole["exported"] >= 1, members
    assert cubes["imported"] > units + whole["cubes_refuted"] + cubes["cubes_refuted"], members
    assert whole["imported"] <= units + cubes["cubes_refuted"], members


def test_a_helper_killed_mid_round_leaves_the_board_readable_and_the_other_helper_answers(two_workers):
    """Helper 1 is killed (SIGKILL) once it has shared learnt clauses; the race goes on: helper 2 (and helper
    1's task delivered again) answer with a verified grid, and every batch on the board reads back."""
    import os
    import signal

    from solvers.model.verify import is_solution

    needs_share()
    text, killed = frisch(3), []
    key = f"sbatch:job:{JOB}:race:0:0:clauses"

    def kill_a_sharing_helper(client: Any) -> None:
        senders = {json.loads(raw)["sender"] for raw in client.lrange(key, 0, -1)}
        racing = [n for n, v in client.hgetall("sbatch:current").items() if v.endswith(b":race")]
        if not killed and senders & {1, 2} and racing:
            pid = int(racing[0].decode().rsplit(":", 1)[1])
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    record, outcome = race_as_owner(two_workers, text, during=kill_a_sharing_helper)
    assert killed, "no helper shared a clause before the race ended"
    assert record.status.value == "solved"
    assert is_solution(parse_puzzle(text), parse_puzzle(record.solution).givens)
