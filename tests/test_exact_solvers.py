"""The exact-solver contract, checked on every registered solver: time limits, the batch
deadline, the node budget, the stop flag, seeds, counters, and grids up to 64x64.

Correct counts and solutions on real puzzles are the job of tests/test_conformance.py.
"""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest

from solvers.exact import EXACT_SOLVERS
from solvers.kernel.outcome import BUDGET, DONE, LIMIT, STOPPED, TIMEOUT
from solvers.model.parse import parse_puzzle
from solvers.model.puzzle import Box, Puzzle
from solvers.model.verify import is_solution, verify_batch
from tests.conftest import corpus_file, wait_until
from tests.data.make_conformance import full_grid, py_count
from tests.grids import blank, pattern_grid

SOLVERS = sorted(EXACT_SOLVERS)
NINE = Box(3, 3)
BIG = Box(5, 5)
# A 9x9 puzzle with a unique solution (tdoku's test set, line 1).
EXAMPLE = ".5..83.17...1..4..3.4..56.8....3...9.9.8245....6....7...9....5...729..861.36.72.4"
MANY = 2**62  # a solution limit no search reaches: count every solution


def hard_25x25() -> np.ndarray:
    """The first of Alain Frisch's minimal 25x25 puzzles, which no solver here finishes in
    a fraction of a second; the test is skipped when the corpora are not there."""
    path = corpus_file("25x25/gecode_frisch_25x25.txt")
    with path.open() as f:
        return parse_puzzle(f.readline().strip(), BIG).givens[None, :]


def empty(box: Box, count: int = 1) -> np.ndarray:
    """Empty grids: counting all their solutions never ends, whatever the solver."""
    return np.zeros((count, box.cells), dtype=np.uint8)


@pytest.mark.parametrize("name", SOLVERS)
def test_a_hard_25x25_puzzle_times_out_promptly_under_a_0_2_s_time_limit(name: str) -> None:
    givens = hard_25x25()
    solver = EXACT_SOLVERS[name]
    solver.solve_batch(givens, BIG, time_limit=0.001)  # compile outside the timing
    t0 = time.process_time()  # CPU, not wall: a loaded machine stretches wall time, never the work done
    out = solver.solve_batch(givens, BIG, limit=2, time_limit=0.2)
    cpu = time.process_time() - t0
    assert out.status[0] == TIMEOUT
    assert out.ns[0] >= 190_000_000 and cpu < 0.5
    assert out.nodes[0] > 0


@pytest.mark.parametrize("name", SOLVERS)
def test_counting_a_25x25_grid_stops_at_the_time_limit_with_the_solutions_found(name: str) -> None:
    solver = EXACT_SOLVERS[name]
    t0 = time.process_time()
    out = solver.solve_batch(empty(BIG), BIG, limit=MANY, keep=2, time_limit=0.2)
    assert time.process_time() - t0 < 0.5
    assert out.status[0] == TIMEOUT
    found = min(int(out.counts[0]), 2)
    puzzle = Puzzle(BIG, empty(BIG)[0])
    assert all(is_solution(puzzle, grid) for grid in out.solutions[0, :found])


@pytest.mark.parametrize("name", SOLVERS)
def test_the_batch_deadline_times_out_the_running_puzzle_and_every_later_one(name: str) -> None:
    solver = EXACT_SOLVERS[name]
    batch = empty(BIG, 3)
    t0 = time.process_time()
    out = solver.solve_batch(batch, BIG, limit=MANY, deadline_ns=time.monotonic_ns() + 200_000_000)
    assert time.process_time() - t0 < 0.5
    assert list(out.status) == [TIMEOUT] * 3
    assert out.nodes[1] == 0 and out.nodes[2] == 0


@pytest.mark.parametrize("name", SOLVERS)
def test_the_node_budget_ends_the_search_with_budget_status(name: str) -> None:
    out = EXACT_SOLVERS[name].solve_batch(empty(NINE, 2), NINE, limit=MANY, max_nodes=1000)
    assert list(out.status) == [BUDGET, BUDGET]
    assert list(out.nodes) == [1000, 1000]


@pytest.mark.parametrize("name", SOLVERS)
def test_a_raised_stop_flag_stops_the_whole_batch(name: str) -> None:
    stop = np.ones(1, dtype=np.int64)
    out = EXACT_SOLVERS[name].solve_batch(empty(NINE, 3), NINE, limit=MANY, stop=stop)
    assert list(out.status) == [STOPPED] * 3


@pytest.mark.parametrize("name", SOLVERS)
def test_the_stop_flag_raised_by_another_thread_stops_a_running_search(name: str) -> None:
    solver = EXACT_SOLVERS[name]
    solver.solve_batch(empty(BIG), BIG, time_limit=0.001)  # compile before the clock runs
    stop = np.zeros(1, dtype=np.int64)
    result = {}
    searching = threading.Event()

    def run() -> None:
        searching.set()
        result["out"] = solver.solve_batch(empty(BIG, 2), BIG, limit=MANY, time_limit=10.0, stop=stop)

    worker = threading.Thread(target=run)
    worker.start()
    assert searching.wait(10)
    begun = time.process_time()  # the search at work: it has used some CPU since it was called
    wait_until(lambda: time.process_time() - begun >= 0.02, 10, "search at work")
    t0 = time.process_time()  # the work done after the flag went up (every thread), not wall time
    stop[0] = 1
    worker.join(5.0)
    assert not worker.is_alive()
    assert time.process_time() - t0 < 0.3
    assert list(result["out"].status) == [STOPPED, STOPPED]


@pytest.mark.parametrize("name", SOLVERS)
def test_seeded_runs_are_reproducible_and_seeds_change_the_branching(name: str) -> None:
    solver = EXACT_SOLVERS[name]
    batch = empty(NINE, 2)

    def first(seed: int) -> tuple[bytes, bytes]:
        out = solver.solve_batch(batch, NINE, limit=1, seed=seed)
        assert list(out.status) == [LIMIT, LIMIT]
        assert verify_batch(batch, out.solutions[:, 0], 3, 3).all()
        return out.solutions.tobytes(), out.nodes.tobytes()

    assert first(0) == first(0)
    assert first(12345) == first(12345)
    grids = {first(seed)[0] for seed in (0, 1, 2, 3)}
    assert len(grids) > 1
    out = solver.solve_batch(batch, NINE, limit=1, seed=99)
    assert not np.array_equal(out.solutions[0], out.solutions[1])  # one stream per puzzle


@pytest.mark.parametrize("name", SOLVERS)
def test_a_unique_puzzle_is_solved_with_consistent_counters(name: str) -> None:
    puzzle = parse_puzzle(EXAMPLE, NINE)
    out = EXACT_SOLVERS[name].solve_batch(puzzle.givens[None, :], NINE, limit=2, keep=2)
    assert out.status[0] == DONE and out.counts[0] == 1
    assert is_solution(puzzle, out.solutions[0, 0])
    assert out.nodes[0] >= out.guesses[0] >= 0 and out.nodes[0] >= 1
    assert out.ns[0] > 0


@pytest.mark.parametrize("name", SOLVERS)
def test_the_one_puzzle_entry_point_returns_every_solution_up_to_the_limit(name: str) -> None:
    puzzle = Puzzle(Box(2, 2), np.zeros(16, dtype=np.uint8))
    outcome = EXACT_SOLVERS[name].run(puzzle, limit=3, rng=np.random.default_rng(5))
    assert outcome.status == "limit" and outcome.complete and outcome.count == 3
    assert len({grid.tobytes() for grid in outcome.solutions}) == 3
    assert all(is_solution(puzzle, grid) for grid in outcome.solutions)


@pytest.mark.parametrize("name", SOLVERS)
def test_clashing_givens_have_no_solution(name: str) -> None:
    givens = np.zeros((1, 81), dtype=np.uint8)
    givens[0, 0] = givens[0, 80] = 5  # legal
    givens[0, 40] = givens[0, 44] = 7  # the same row twice
    out = EXACT_SOLVERS[name].solve_batch(givens, NINE, limit=2)
    assert out.status[0] == DONE and out.counts[0] == 0


@pytest.mark.parametrize("name", SOLVERS)
@pytest.mark.parametrize("box", [Box(6, 6), Box(4, 9), Box(9, 4), Box(8, 8), Box(7, 9)], ids=str)
def test_an_easy_large_grid_up_to_64x64_is_solved_and_verified(name: str, box: Box) -> None:
    givens = blank(pattern_grid(box), 0.2, seed=7)[None, :]
    out = EXACT_SOLVERS[name].solve_batch(givens, box, limit=1, time_limit=10.0)
    assert out.status[0] == LIMIT and out.counts[0] == 1
    assert is_solution(Puzzle(box, givens[0]), out.solutions[0, 0])


def random_small_puzzles(box: Box, count: int, seed: int) -> list[list[int]]:
    """Random partial grids of a valid grid, some with a wrong (maybe clashing) value."""
    rng = random.Random(seed)
    puzzles = []
    for _ in range(count):
        frac = rng.uniform(0.3, 0.9)
        grid = [0 if rng.random() < frac else v for v in full_grid(box, rng)]
        if rng.random() < 0.3:
            grid[rng.randrange(box.cells)] = rng.randint(1, box.n)
        puzzles.append(grid)
    return puzzles


SMALL_SHAPES = [
    Box(1, 2),
    Box(3, 1),
    Box(1, 4),
    Box(2, 2),
    Box(1, 6),
    Box(2, 3),
    Box(3, 2),
    Box(2, 4),
    Box(3, 3),
]


@pytest.mark.parametrize("name", SOLVERS)
@pytest.mark.parametrize("box", SMALL_SHAPES, ids=str)
def test_counts_agree_with_an_independent_counter_on_random_small_puzzles(name: str, box: Box) -> None:
    puzzles = random_small_puzzles(box, 15, seed=box.rows * 10 + box.cols)
    cap = 30
    expected = [py_count(p, box, cap)[0] for p in puzzles]
    givens = np.array(puzzles, dtype=np.uint8)
    for seed in (0, 7):
        out = EXACT_SOLVERS[name].solve_batch(givens, box, limit=cap, seed=seed)
        assert list(out.counts) == expected
        assert list(out.status) == [LIMIT if c >= cap else DONE for c in expected]
        solved = out.counts > 0
        assert verify_batch(givens[solved], out.solutions[solved, 0], box.rows, box.cols).all()
