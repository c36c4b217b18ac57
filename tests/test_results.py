"""`solve_many`'s Results: a list to its users, columns to the pipeline, the same bytes either way."""

from __future__ import annotations

import json

import pytest

from solvers import Status, solve_many
from solvers.model.result import Results, SolveResult
from tests.jsonl_reference import columns, render, render_py

EXAMPLE = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"
NO_SOLUTION = "1...5.2.9..7.......6.......2...........5.1..2....2.39.3.4.9...15...1...3...8...4."
FOUR = "1.3.3..2.1.3..2."  # a 4x4 puzzle beside the 9x9 ones: a second kernel group
MIXED = [EXAMPLE, "not a puzzle", NO_SOLUTION, FOUR, "1 2 3 4\n3 4 1 2\n2 1 4 3\n4 3 2 1", EXAMPLE]


def test_results_index_slice_iterate_and_compare_like_the_list_they_stand_for():
    results = solve_many(MIXED)
    assert isinstance(results, Results) and len(results) == len(MIXED)
    as_list = list(results)
    assert results == as_list and as_list == list(results)
    assert results[-1] is results[5] and results[1:3] == as_list[1:3]
    assert [r.status for r in results] == ["solved", "invalid", "unsolvable", "solved", "solved", "solved"]
    with pytest.raises(IndexError):
        results[len(MIXED)]


def test_a_row_is_built_once_so_edits_to_it_stick():
    results = solve_many([EXAMPLE, EXAMPLE])
    results[0].error = "edited"
    assert results[0].error == "edited" and results[1].error is None


def test_a_row_read_from_the_columns_carries_every_field_of_a_kernel_answer():
    r = solve_many([EXAMPLE])[0]
    assert isinstance(r, SolveResult) and r.status is Status.SOLVED and r.cost == 0
    assert r.solver == "propagation" and r.puzzle == EXAMPLE and r.solution_count is None
    (counters,) = r.counters.values()
    assert list(r.counters) == ["propagation"] and counters["nodes"] == r.nodes
    assert counters["guesses"] == r.guesses and counters["time_ms"] == pytest.approx(r.elapsed * 1000)
    counted = solve_many([EXAMPLE, NO_SOLUTION], limit=2)
    assert [c.solution_count for c in counted] == [1, 0]


@pytest.mark.parametrize("portfolio", [None, "race"])
def test_the_columns_render_the_same_records_as_the_objects_they_stand_for(portfolio):
    columnar = solve_many(MIXED, portfolio=portfolio, time_limit=2)
    objects = list(solve_many(MIXED, portfolio=portfolio, time_limit=2))
    texts = [r.puzzle for r in objects]
    idx, lines = list(range(len(MIXED))), list(range(1, len(MIXED) + 1))
    fresh = render_py("in", idx, lines, columns(texts, columnar))
    mine = [json.loads(x) for x in fresh.split(b"\n")]
    theirs = [json.loads(x) for x in render_py("in", idx, lines, columns(texts, objects)).split(b"\n")]
    for a, b in zip(mine, theirs, strict=True):  # the times differ between the two solves
        for rec in (a, b):
            rec.pop("time_ms")
            for c in rec["counters"].values():
                c.pop("time_ms", None)
                c.pop("time_used_ms", None)
    assert mine == theirs
    assert render("in", idx, lines, columns(texts, columnar)) == fresh


def test_reading_some_rows_first_changes_nothing_in_the_records():
    untouched = solve_many(MIXED)
    read = solve_many(MIXED)
    _ = read[0], read[3]
    texts = [r.puzzle for r in untouched]
    idx, lines = list(range(len(MIXED))), list(range(1, len(MIXED) + 1))
    a = [json.loads(x) for x in render_py("in", idx, lines, columns(texts, untouched)).split(b"\n")]
    b = [json.loads(x) for x in render_py("in", idx, lines, columns(texts, read)).split(b"\n")]
    assert [(x["status"], x["solution"], x["solver"], x["error"]) for x in a] == [
        (x["status"], x["solution"], x["solver"], x["error"]) for x in b
    ]


def test_a_batch_of_one_compact_group_keeps_its_grids_as_symbols_and_renders_them_the_same():
    lines = [EXAMPLE, NO_SOLUTION, EXAMPLE.replace(".", "0")]
    results = solve_many(lines)
    cols = columns(lines, results)
    assert results.symbols is not None and results.solutions == [None] * 3  # no text made for any solution
    idx, rows = [0, 1, 2], [1, 2, 3]
    compiled = render("in", idx, rows, cols)
    assert compiled == render_py("in", idx, rows, columns(lines, results))
    records = [json.loads(x) for x in compiled.split(b"\n")]
    assert [r["status"] for r in records] == ["solved", "unsolvable", "solved"]
    assert records[1]["solution"] is None and records[0]["solution"] == results[0].solution
    assert results[2].solution == records[2]["solution"] and len(records[2]["solution"]) == 81


def test_results_concatenate_with_lists_and_survive_pickling_like_a_list():
    import pickle

    first, second = solve_many([EXAMPLE]), solve_many([NO_SOLUTION, "bad"])
    joined = first + second
    assert isinstance(joined, list) and [r.status for r in joined] == ["solved", "unsolvable", "invalid"]
    assert [r.status for r in [*[]] + second] == ["unsolvable", "invalid"]
    assert pickle.loads(pickle.dumps(second)) == list(second)
    assert solve_many([]) == [] and not solve_many([])
