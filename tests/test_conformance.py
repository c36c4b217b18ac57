"""Every registered exact solver agrees with the conformance data (tests/data/conformance.txt).

Each line gives a puzzle, its box shape and its solution count: exact counts are checked
with limit = count + 1 (the search must finish, status `done`), capped counts `k+` with
limit = k (the search must stop at k, status `limit`). Every solution a solver keeps is
checked with the independent verifier, the kept solutions must differ from each other,
and a unique solution must be the one written in the file. Lines marked `slow_for` a
solver are skipped for that solver only.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from solvers.exact import EXACT_SOLVERS
from solvers.kernel.outcome import OUTCOME_NAMES
from solvers.model.parse import parse_puzzle
from solvers.model.puzzle import Box
from solvers.model.verify import is_solution
from tests.conftest import corpus_file

DATA = Path(__file__).parent / "data" / "conformance.txt"
TIME_LIMIT = 10.0  # seconds per puzzle: far above every solver's time on every kept line
KEEP = 8  # solutions kept and verified per line (at most)


@dataclass(frozen=True)
class Case:
    box: Box
    puzzle: str
    count: int
    at_least: bool  # True when the count is `count+`
    solution: str | None
    origin: str
    slow_for: frozenset[str]


def load_cases(path: Path = DATA) -> list[Case]:
    cases = []
    for raw in path.read_text().splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        box, puzzle, expected, solution, origin, slow_for = raw.split("\t")
        cases.append(
            Case(
                box=Box.parse(box),
                puzzle=puzzle,
                count=int(expected.rstrip("+")),
                at_least=expected.endswith("+"),
                solution=None if solution == "-" else solution,
                origin=origin,
                slow_for=frozenset() if slow_for == "-" else frozenset(slow_for.split(",")),
            )
        )
    return cases


CASES = load_cases()


def test_every_exact_solver_of_the_architecture_is_registered() -> None:
    assert {"backtracking", "propagation", "digitwise", "exact_cover"} <= set(EXACT_SOLVERS)


def test_the_conformance_data_covers_every_box_shape_and_every_kind_of_outcome() -> None:
    shapes = {str(c.box) for c in CASES}
    assert {"2x2", "2x3", "3x2", "2x4", "3x3", "3x4", "4x4", "5x5"} <= shapes
    tdoku = [c for c in CASES if c.origin.startswith("tdoku:")]
    outcome = Counter(
        "none" if c.count == 0 else "one" if c.count == 1 and not c.at_least else "many" for c in tdoku
    )
    assert outcome == {"none": 10, "one": 18, "many": 15}
    assert any(c.at_least for c in CASES)
    for c in CASES:
        assert c.slow_for <= set(EXACT_SOLVERS), c.origin
        if c.origin.startswith("tdoku:"):
            assert not c.slow_for, f"{c.origin}: tdoku's test set must pass with every solver"


def test_the_tdoku_lines_are_tdokus_whole_test_set_with_its_expected_counts() -> None:
    source = corpus_file("9x9/tdoku_test_puzzles.txt")
    expected = source.with_suffix(".expected.tsv").read_text().splitlines()[1:]
    wanted = [(p, *e.split("\t")) for p, e in zip(source.read_text().split(), expected, strict=True)]
    ours = [(c.puzzle, str(c.count), c.solution or "") for c in CASES if c.origin.startswith("tdoku:")]
    assert ours == wanted


def test_every_unique_solution_written_in_the_data_is_a_solution_of_its_puzzle() -> None:
    for c in CASES:
        assert (c.solution is not None) == (c.count == 1 and not c.at_least), c.origin
        if c.solution is not None:
            puzzle = parse_puzzle(c.puzzle, c.box)
            assert is_solution(puzzle, parse_puzzle(c.solution, c.box).givens), c.origin


@pytest.mark.parametrize("case", CASES, ids=[c.origin for c in CASES])
@pytest.mark.parametrize("solver_name", sorted(EXACT_SOLVERS))
def test_the_solver_finds_exactly_the_expected_solutions(solver_name: str, case: Case) -> None:
    if solver_name in case.slow_for:
        pytest.skip(f"{case.origin} is marked too slow for {solver_name}")
    solver = EXACT_SOLVERS[solver_name]
    puzzle = parse_puzzle(case.puzzle, case.box)
    limit = case.count if case.at_least else case.count + 1
    keep = min(limit, KEEP)
    out = solver.solve_batch(puzzle.givens[None, :], case.box, limit=limit, keep=keep, time_limit=TIME_LIMIT)
    status = OUTCOME_NAMES[int(out.status[0])]
    assert (status, int(out.counts[0])) == ("limit" if case.at_least else "done", case.count)
    kept = out.solutions[0, : min(case.count, keep)]
    for grid in kept:
        assert is_solution(puzzle, grid)
    assert len({grid.tobytes() for grid in kept}) == len(kept), "a solution was counted twice"
    if case.solution is not None:
        assert np.array_equal(kept[0], parse_puzzle(case.solution, case.box).givens)
