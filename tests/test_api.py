"""The public API: `solve` and `solve_many` as a notebook user calls them."""

from __future__ import annotations

import numpy as np
import pytest

from solvers import Box, Status, grid_cost, is_solution, parse_puzzle, solve, solve_many
from tests.grids import blank, pattern_grid

EXAMPLE = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"
# Two 9x9 puzzles from tdoku's test set: one with no solution, one with several.
NO_SOLUTION = "1...5.2.9..7.......6.......2...........5.1..2....2.39.3.4.9...15...1...3...8...4."
TWO_PLUS = "........................................................................7..8.9..."


def test_solve_returns_a_verified_solution_in_the_input_alphabet():
    r = solve(EXAMPLE, time_limit=5)
    assert r.status == "solved" and r.status is Status.SOLVED
    assert r.cost == 0 and r.solver == "propagation" and r.elapsed >= 0
    assert is_solution(parse_puzzle(EXAMPLE), np.array([int(ch) for ch in r.solution]))
    assert r.counters["propagation"]["nodes"] >= 1


def test_solve_many_keeps_the_input_order_and_answers_every_line():
    lines = [EXAMPLE, "not a puzzle", NO_SOLUTION, EXAMPLE.replace(".", "0")]
    results = solve_many(lines)
    assert [r.status for r in results] == ["solved", "invalid", "unsolvable", "solved"]
    assert [r.puzzle for r in results] == lines
    assert results[1].error.startswith("10 cells")
    assert results[2].solution is None and results[2].cost is None


def test_a_clash_among_givens_is_invalid_with_the_reason():
    r = solve("55" + EXAMPLE[2:])
    assert r.status == "invalid" and r.error == "row 1 has two 5s"


def test_counting_solutions_tells_unique_from_many():
    assert solve(EXAMPLE, limit=2).solution_count == 1
    many = solve(TWO_PLUS, limit=2)
    assert many.status == "solved" and many.solution_count == 2


@pytest.mark.parametrize("shape", [(2, 2), (2, 3), (3, 2), (3, 4), (4, 4), (5, 5)])
def test_every_box_shape_solves_through_the_api(shape):
    box = Box(*shape)
    givens = blank(pattern_grid(box), 0.45, seed=7)
    text = ",".join(str(v) for v in givens)
    r = solve(text, box=f"{shape[0]}x{shape[1]}", time_limit=10)
    assert r.status == "solved", r
    grid = np.array([int(t) for t in r.solution.split(",")], dtype=np.uint8)
    assert is_solution(parse_puzzle(text, box), grid)
    assert grid_cost(parse_puzzle(text, box), grid) == 0


def test_a_rectangular_compact_line_gets_its_conventional_box_and_a_given_box_overrides_it():
    text = "".join(str(v) if v else "." for v in blank(pattern_grid(Box(2, 3)), 0.5, seed=1))
    assert solve(text).status == "solved" and solve(text, box="2x3").status == "solved"
    full = "".join(str(v) for v in pattern_grid(Box(3, 2)))  # valid in 3x2 boxes, not in 2x3 ones
    assert solve(full).status == "invalid" and "box 1 has two" in solve(full).error
    assert solve(full, box="3x2").status == "solved"
    assert [r.status for r in solve_many([text, full, text])] == ["solved", "invalid", "solved"]


def test_a_time_limit_turns_an_unfinished_search_into_a_timeout():
    # A 64x64 grid has 4096 cells to fill: 1 ms is not enough to even propagate them all.
    r = solve(",".join(["0"] * 4096), time_limit=0.001)
    assert r.status == "timeout"
    assert r.solution is None and r.cost is None and "time limit" in r.error


def test_other_registered_solvers_can_be_chosen():
    for name in ("backtracking", "digitwise", "exact_cover"):
        r = solve(EXAMPLE, solver=name, time_limit=10)
        assert r.status == "solved" and r.solver == name


def test_an_unknown_solver_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown"):
        solve(EXAMPLE, solver="magic")


def test_results_turn_into_json_ready_dicts():
    d = solve(EXAMPLE).to_dict()
    assert d["status"] == "solved" and isinstance(d["elapsed"], float)
    import json

    json.dumps(d)


@pytest.mark.parametrize("portfolio", [None, "race"])
def test_clashing_givens_among_solvable_lines_are_invalid_and_never_solved_or_raced(portfolio):
    clash = "55" + EXAMPLE[2:]
    twice = EXAMPLE[:-2] + "99"  # the last row and box hold two 9s
    lines = [EXAMPLE, clash, NO_SOLUTION, twice, EXAMPLE]
    results = solve_many(lines, portfolio=portfolio, time_limit=5)
    assert [r.status for r in results] == ["solved", "invalid", "unsolvable", "invalid", "solved"]
    assert results[1].error == "row 1 has two 5s" and results[3].error == "row 9 has two 9s"
    for r in (results[1], results[3]):
        assert r.solver is None and r.nodes == 0 and r.counters == {} and r.solution is None


def test_lines_joined_in_one_text_read_as_the_list_of_them():
    from solvers.model.parse import Lines

    lines = [EXAMPLE, " " + EXAMPLE[1:], "55" + EXAMPLE[2:], NO_SOLUTION, "x" * 81, EXAMPLE.replace(".", "0")]
    joined = solve_many(Lines("\n".join(lines), len(lines)))

    def untimed(r):  # noqa: ANN001, ANN202 - a result's fields but its times
        return {k: v for k, v in r.to_dict().items() if k not in ("elapsed", "counters")}

    assert [untimed(r) for r in joined] == [untimed(r) for r in solve_many(lines)]
    assert [r.status for r in joined] == ["solved", "invalid", "invalid", "unsolvable", "invalid", "solved"]
    assert joined[1].puzzle == EXAMPLE[1:]  # stripped, as every line is
    assert [r.status for r in solve_many(Lines("\n".join([EXAMPLE, EXAMPLE[:40], EXAMPLE]), 3))] == [
        "solved",
        "invalid",
        "solved",
    ]
