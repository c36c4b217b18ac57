"""The stochastic solvers: cost kept exactly, invariants held at every move, seeded replay."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from solvers.kernel.outcome import SOLVED
from solvers.model.cost import grid_cost
from solvers.model.geometry import geometry
from solvers.model.parse import parse_puzzle
from solvers.model.puzzle import Box, Puzzle
from solvers.model.verify import is_solution
from solvers.stochastic import STOCHASTIC_SOLVERS
from solvers.stochastic.state import (
    apply_swap,
    domains,
    fill_boxes_matched,
    new_rng,
    propagate_singles,
    recount,
    restricted,
    swap_delta,
)
from tests.grids import blank, pattern_grid

# The seed article's demo puzzle (rows of its Figure 1).
DEMO = "..62...8...897......481.5......6...2.7.....3.6...5......2.471....3.284...5...12.."
HARD = "4.....8.5.3..........7......2.....6.....8.4......1.......6.3.7.5..2.....1.4......"  # top95 #1
NAMES = sorted(STOCHASTIC_SOLVERS)


def small_puzzle(rows: int, cols: int, fraction: float, seed: int) -> Puzzle:
    """A solvable puzzle of box rows x cols with `fraction` of its cells emptied."""
    box = Box(rows, cols)
    return Puzzle(box, blank(pattern_grid(box), fraction, seed))


def boxes_hold_every_value(puzzle: Puzzle, grid: np.ndarray) -> bool:
    """True when every box of `grid` holds 1..N once."""
    n = puzzle.box.n
    units = geometry(puzzle.box).units
    return all(sorted(grid[units[2 * n + b]].tolist()) == list(range(1, n + 1)) for b in range(n))


def keeps_givens(puzzle: Puzzle, grid: np.ndarray) -> bool:
    """True when `grid` agrees with every given of `puzzle`."""
    g = puzzle.givens
    return bool(((g == 0) | (g == grid)).all())


@pytest.mark.parametrize("name", NAMES)
def test_each_solver_lowers_the_cost_of_its_starting_grid(name):
    puzzle = parse_puzzle(HARD)
    solver = STOCHASTIC_SOLVERS[name]
    run = solver.start(puzzle, np.random.default_rng(7), solver.make_params({"propagate": False}))
    start = run.best_cost
    run.step(20_000)
    assert run.best_cost < start
    assert grid_cost(puzzle, run.best_grid) == run.best_cost


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", [(2, 2), (2, 3)])
def test_each_solver_solves_small_puzzles_from_the_givens_alone(name, shape):
    puzzle = small_puzzle(*shape, fraction=0.6, seed=3)
    result = STOCHASTIC_SOLVERS[name].solve(
        puzzle, time_limit=10, seed=11, params={"propagate": False}, max_work=2_000_000
    )
    assert result.status == "solved" and result.cost == 0 and result.solver == name
    grid = np.array([int(ch) for ch in result.solution], dtype=np.uint8)
    assert is_solution(puzzle, grid)


def test_annealing_solves_the_article_demo_and_a_hard_9x9():
    for text, seed in ((DEMO, 1), (HARD, 2)):
        result = STOCHASTIC_SOLVERS["annealing"].solve(parse_puzzle(text), time_limit=10, seed=seed)
        assert result.status == "solved", (text, result.cost)
        assert result.counters["annealing"]["iterations"] > 0


@pytest.mark.parametrize("name", ["annealing", "progressive"])
def test_box_invariant_givens_and_incremental_cost_hold_after_every_move(name):
    puzzle = parse_puzzle(HARD)
    solver = STOCHASTIC_SOLVERS[name]
    overrides = {"neighbourhood": 40} if name == "progressive" else {}  # RandomItem recounts too
    run = solver.start(puzzle, np.random.default_rng(5), solver.make_params(overrides))
    for _ in range(400):  # one work unit per step: one move, or a move plus a queue copy
        if run.step(1) == SOLVED:
            break
        assert boxes_hold_every_value(puzzle, run.grid)
        assert keeps_givens(puzzle, run.grid)
        assert run.istate[1] == grid_cost(puzzle, run.grid)  # the incremental cost is exact
        assert boxes_hold_every_value(puzzle, run.best_grid) and keeps_givens(puzzle, run.best_grid)


def test_evolution_keeps_every_organism_box_invariant_with_its_true_error():
    puzzle = parse_puzzle(DEMO)
    solver = STOCHASTIC_SOLVERS["evolution"]
    run = solver.start(
        puzzle, np.random.default_rng(3), solver.make_params({"organisms": 20, "max_epochs": 5})
    )
    for _ in range(80):
        if run.step(37) == SOLVED:
            break
        for grid, err in zip(run.grids, run.err, strict=True):
            assert boxes_hold_every_value(puzzle, grid) and keeps_givens(puzzle, grid)
            assert err == grid_cost(puzzle, grid)
    assert run.restarts >= 1  # max_epochs (5 epochs) reached: the hive restarted


def test_the_article_variant_keeps_rows_as_permutations_and_pays_for_changed_givens():
    puzzle = parse_puzzle(DEMO)
    solver = STOCHASTIC_SOLVERS["progressive"]
    params = solver.make_params({"variant": "article", "neighbourhood": 50, "distinct": False})
    run = solver.start(puzzle, np.random.default_rng(1), params)
    assert (run.grid.reshape(9, 9) == np.arange(1, 10)).all()  # 1..N in every row
    for _ in range(300):
        run.step(1)
        assert all(sorted(row) == list(range(1, 10)) for row in run.grid.reshape(9, 9).tolist())
        assert run.istate[1] == grid_cost(puzzle, run.grid)  # includes 8 per changed given


def test_swap_delta_is_the_change_of_the_reference_cost_for_any_two_cells():
    puzzle = parse_puzzle(DEMO)
    t = geometry(puzzle.box)
    rng = np.random.default_rng(0)
    grid = rng.integers(1, 10, size=81).astype(np.uint8)
    counts = np.zeros((27, 10), dtype=np.int32)
    cost = recount(grid, puzzle.givens, t.units, counts, 8)
    assert cost == grid_cost(puzzle, grid)
    for _ in range(500):
        a, b = (int(x) for x in rng.choice(81, size=2, replace=False))
        d = swap_delta(grid, puzzle.givens, counts, t.cell_units, a, b, 8)
        apply_swap(grid, counts, t.cell_units, a, b)
        cost += d
        assert cost == grid_cost(puzzle, grid)


@pytest.mark.parametrize(("rows", "fraction"), [(3, 0.6), (8, 0.02)])
def test_singles_only_fix_values_of_the_solution_and_candidates_keep_it(rows, fraction):
    box = Box(rows, rows)  # 64x64 too: a value's bit is bit 63 there
    solution = pattern_grid(box)
    puzzle = Puzzle(box, blank(solution, fraction, seed=9))
    fixed, cand = domains(puzzle, propagate=True)
    assert ((fixed == 0) | (fixed == solution)).all() and (fixed > 0).sum() > (puzzle.givens > 0).sum()
    assert all((int(cand[c]) >> (int(solution[c]) - 1)) & 1 for c in range(box.cells))


@pytest.mark.parametrize("n", [4, 9, 64])
def test_every_value_allowed_everywhere_is_no_restriction(n):
    full = np.full(n * n, (1 << n) - 1, dtype=np.uint64)
    assert not restricted(full, n)
    full[3] &= ~np.uint64(1 << (n - 1))
    assert restricted(full, n)


def test_singles_report_a_contradiction():
    givens = parse_puzzle(DEMO).givens.copy()
    givens[0] = 6  # row 1 already holds a 6 two cells on
    t = geometry(Box(3, 3))
    out = np.zeros(81, dtype=np.uint8)
    cand = np.zeros(81, dtype=np.uint64)
    assert not propagate_singles(givens, t.units, t.peers, out, cand)


def test_the_matched_fill_gives_every_free_cell_one_of_its_candidates():
    puzzle = parse_puzzle(HARD)
    fixed, cand = domains(puzzle, propagate=True)
    grid = np.zeros(81, dtype=np.uint8)
    assert fill_boxes_matched(
        fixed, cand, geometry(puzzle.box).units, new_rng(np.random.default_rng(4)), grid
    )
    assert boxes_hold_every_value(puzzle, grid) and keeps_givens(puzzle, grid)
    assert all((int(cand[c]) >> (int(grid[c]) - 1)) & 1 for c in range(81))


@pytest.mark.parametrize("name", NAMES)
def test_a_run_replays_exactly_from_the_same_seed(name):
    puzzle = parse_puzzle(HARD)
    solver = STOCHASTIC_SOLVERS[name]
    runs = [solver.start(puzzle, np.random.default_rng(42), solver.make_params()) for _ in range(2)]
    for run in runs:
        for _ in range(5):
            run.step(3_000)
    assert runs[0].iterations == runs[1].iterations and runs[0].best_cost == runs[1].best_cost
    assert (runs[0].best_grid == runs[1].best_grid).all()


def test_an_approximate_result_carries_the_true_cost_of_its_grid():
    puzzle = parse_puzzle(HARD)
    result = STOCHASTIC_SOLVERS["evolution"].solve(puzzle, time_limit=5, seed=1, max_work=30_000)
    assert result.status == "approximate" and result.cost > 0
    grid = np.array([int(ch) for ch in result.solution], dtype=np.uint8)
    assert result.cost == grid_cost(puzzle, grid) == result.counters["evolution"]["best_cost"]


def test_unknown_parameters_are_rejected_by_name():
    with pytest.raises(ValidationError, match="temperature"):
        STOCHASTIC_SOLVERS["annealing"].make_params({"temperature": 3})
