"""The independent verifier and the one cost function agree on what a solution is."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solvers.model.cost import grid_cost
from solvers.model.puzzle import Box, Puzzle
from solvers.model.verify import is_solution, verify_batch
from tests.grids import blank, pattern_grid

SHAPES = [(2, 2), (2, 3), (3, 2), (3, 3), (2, 4), (3, 4), (4, 4), (5, 5), (6, 6), (8, 8)]


def puzzle_of(box: Box, givens: np.ndarray) -> Puzzle:
    return Puzzle(box, givens.astype(np.uint8))


@pytest.mark.parametrize("shape", SHAPES)
def test_a_valid_grid_is_a_solution_with_cost_zero(shape):
    box = Box(*shape)
    grid = pattern_grid(box)
    puzzle = puzzle_of(box, blank(grid, 0.6, seed=1))
    assert is_solution(puzzle, grid)
    assert grid_cost(puzzle, grid) == 0
    assert verify_batch(puzzle.givens[None], grid[None], box.rows, box.cols).tolist() == [True]


@pytest.mark.parametrize("shape", SHAPES)
def test_swapping_two_cells_of_a_row_breaks_the_columns_and_costs_something(shape):
    box = Box(*shape)
    grid = pattern_grid(box)
    bad = grid.copy()
    bad[0], bad[1] = grid[1], grid[0]
    puzzle = puzzle_of(box, np.zeros(box.cells, np.uint8))
    assert not is_solution(puzzle, bad)
    assert grid_cost(puzzle, bad) > 0
    assert not verify_batch(puzzle.givens[None], bad[None], box.rows, box.cols)[0]


def test_a_changed_given_costs_the_given_weight_and_is_not_a_solution():
    box = Box(3, 3)
    grid = pattern_grid(box)
    givens = grid.copy()
    givens[0] = grid[0] % 9 + 1  # the solution disagrees with this given
    puzzle = puzzle_of(box, givens)
    assert not is_solution(puzzle, grid)
    assert grid_cost(puzzle, grid) == 8
    assert grid_cost(puzzle, grid, given_weight=3) == 3
    assert not verify_batch(givens[None], grid[None], 3, 3)[0]


def test_cost_counts_one_per_value_missing_from_each_unit():
    box = Box(2, 2)
    grid = np.ones(16, dtype=np.uint8)  # every unit holds only 1s: 3 missing per unit
    assert grid_cost(puzzle_of(box, np.zeros(16, np.uint8)), grid) == 12 * 3


def test_a_grid_with_an_empty_cell_or_a_wrong_size_is_not_a_solution():
    box = Box(3, 3)
    grid = pattern_grid(box)
    puzzle = puzzle_of(box, np.zeros(81, np.uint8))
    holed = grid.copy()
    holed[40] = 0
    assert not is_solution(puzzle, holed)
    assert not is_solution(puzzle, grid[:80])
    assert not verify_batch(puzzle.givens[None], holed[None], 3, 3)[0]


def test_the_verifier_knows_rectangular_boxes_apart():
    """A grid valid for 2x3 boxes is not valid for 3x2 boxes: the box shape matters."""
    grid = pattern_grid(Box(2, 3))
    assert is_solution(puzzle_of(Box(2, 3), np.zeros(36, np.uint8)), grid)
    assert not is_solution(puzzle_of(Box(3, 2), np.zeros(36, np.uint8)), grid)
    assert verify_batch(np.zeros((1, 36), np.uint8), grid[None], 2, 3)[0]
    assert not verify_batch(np.zeros((1, 36), np.uint8), grid[None], 3, 2)[0]


@settings(max_examples=200, deadline=None)
@given(
    shape=st.sampled_from(SHAPES[:6]),
    swaps=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)), max_size=3),
    relabel=st.booleans(),
)
def test_both_verifiers_and_the_cost_agree_on_any_grid(shape, swaps, relabel):
    box = Box(*shape)
    grid = pattern_grid(box)
    if relabel:  # a relabelled valid grid is still valid
        perm = np.random.default_rng(len(swaps)).permutation(box.n) + 1
        grid = perm[grid - 1].astype(np.uint8)
    for a, b in swaps:
        a, b = a % box.cells, b % box.cells
        grid[a], grid[b] = grid[b], grid[a]
    puzzle = puzzle_of(box, np.zeros(box.cells, np.uint8))
    verdict = is_solution(puzzle, grid)
    assert verify_batch(puzzle.givens[None], grid[None], box.rows, box.cols)[0] == verdict
    assert (grid_cost(puzzle, grid) == 0) == verdict


@settings(max_examples=300, deadline=None)
@given(
    writes=st.lists(st.tuples(st.integers(0, 80), st.integers(0, 255)), max_size=3),
    swaps=st.lists(st.tuples(st.integers(0, 80), st.integers(0, 80)), max_size=2),
    given_cells=st.lists(st.integers(0, 80), max_size=20),
    given_shift=st.integers(0, 9),
)
def test_the_9x9_verifier_agrees_with_the_plain_one_on_any_grid_and_givens(
    writes, swaps, given_cells, given_shift
):
    box = Box(3, 3)
    grid = pattern_grid(box)
    givens = np.zeros(81, np.uint8)
    for cell in given_cells:  # givens from the grid, some of them changed
        givens[cell] = (int(grid[cell]) + given_shift - 1) % 9 + 1
    for a, b in swaps:
        grid[a], grid[b] = grid[b], grid[a]
    for cell, value in writes:
        grid[cell] = value
    batch = np.stack([grid, pattern_grid(box)])  # a second, valid row: each row is judged alone
    verdicts = verify_batch(np.stack([givens, np.zeros(81, np.uint8)]), batch, 3, 3).tolist()
    assert verdicts == [is_solution(puzzle_of(box, givens), grid), True]
