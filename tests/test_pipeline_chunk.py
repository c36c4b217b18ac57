"""The chunk function and its payloads: every puzzle answered, verified, rendered the same both ways."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import solvers.api
from pipeline.contract.part import Part
from pipeline.contract.runs import expand_runs, join_texts, split_texts, to_runs
from pipeline.contract.tasks import ChunkTask
from pipeline.contract.tasks import solver_seed as chunk_seed
from pipeline.engine.solve import answered_chunk, solve_chunk
from solvers.fields import NAMES
from solvers.model.parse import parse_puzzle
from solvers.model.result import SolveResult, Status
from solvers.model.verify import is_solution
from tests.conftest import SAMPLE, chunk_task
from tests.jsonl_reference import columns, render, render_py

LINES = SAMPLE.read_text().splitlines()
JOB = "ab" * 16
ROWS_9 = "\n".join(",".join("0" if ch == "." else ch for ch in LINES[0][r * 9 : r * 9 + 9]) for r in range(9))


def task_of(texts: list[str], first_index: int = 0, chunk: int = 0, **kw) -> ChunkTask:
    return chunk_task(JOB, texts, chunk=chunk, first=first_index, first_line=1, **kw)


def test_a_chunk_answers_every_puzzle_in_order_with_verified_solutions_in_the_input_notation():
    texts = LINES[:40] + [ROWS_9, LINES[41].replace(".", "0"), "1" * 81]
    result = solve_chunk(task_of(texts, first_index=10))
    records = [json.loads(line) for line in result.lines()]
    assert [r["index"] for r in records] == list(range(10, 10 + len(texts)))
    assert [r["puzzle"] for r in records] == texts
    assert all(tuple(r) == NAMES for r in records)
    for r in records[:-1]:
        assert r["status"] == "solved" and r["cost"] == 0 and r["solver"] == "propagation"
        puzzle = parse_puzzle(r["puzzle"])
        grid = parse_puzzle(r["solution"]).givens
        assert is_solution(puzzle, grid)
        assert r["counters"]["propagation"]["nodes"] == r["nodes"]
    assert "," in records[-3]["solution"] and "0" not in records[-2]["solution"]
    assert records[-1]["status"] == "invalid" and records[-1]["error"] == "row 1 has 9 1s"
    stats = result.header.stats
    assert stats.n == len(texts) and stats.counts == {"solved": len(texts) - 1, "invalid": 1}
    assert stats.problems[0].index == 10 + len(texts) - 1 and stats.solver_cpu_s > 0


def test_the_compiled_renderer_writes_exactly_the_bytes_of_the_python_one():
    simple = {"propagation": {"nodes": 3, "guesses": 1, "time_ms": 0.015}}
    several = {'an"neal': {"iterations": 10, "best": 4.5}, "propagation": {"nodes": 1}}
    huge = {"propagation": {"nodes": 10**12, "guesses": 0, "time_ms": 5e3}}
    tiny = {"dlx": {"nodes": 5, "guesses": 2, "time_ms": np.float64(1e-6)}}
    results = [
        SolveResult(Status.SOLVED, "..", "12", 0, "propagation", 1.5e-5, 3, counters=simple),
        SolveResult(Status.APPROXIMATE, '"q\\', "1\t2", 4, 'an"neal', 2.0, restarts=7, counters=several),
        SolveResult(
            Status.TIMEOUT, "x\ny", error="no solution", elapsed=5.0, solver="propagation", counters=huge
        ),
        SolveResult(Status.INVALID, "é\x01", error="cell 1: unknown symbol 'é' \x02"),
        SolveResult(
            Status.ERROR, "", error="boom", elapsed=float("nan"), counters={"a": {"b": np.float64(1.25)}}
        ),
        SolveResult(
            Status.UNSOLVABLE, "7", solver="dlx", elapsed=1e-9, nodes=np.int64(5), guesses=2, counters=tiny
        ),
    ]
    texts = [r.puzzle for r in results]
    cols = columns(texts, results)
    indices, lines = list(range(7, 13)), [1, 3, 5, 8, 9, 100]
    compiled = render('dir/ä "in".txt', indices, lines, cols)
    assert compiled == render_py('dir/ä "in".txt', indices, lines, columns(texts, results))
    records = [json.loads(line) for line in compiled.split(b"\n")]
    assert [r["status"] for r in records] == [r.status.value for r in results]
    assert records[1]["counters"] == {'an"neal': {"iterations": 10, "best": 4.5}, "propagation": {"nodes": 1}}
    assert records[2]["puzzle"] == "x\ny" and records[2]["counters"]["propagation"]["nodes"] == 10**12
    assert records[3]["error"] == "cell 1: unknown symbol 'é' \x02" and records[3]["solution"] is None
    assert records[4]["time_ms"] is None and records[4]["counters"] == {"a": {"b": 1.25}}
    assert records[5]["time_ms"] == 0.0 and records[5]["counters"]["dlx"]["time_ms"] == 0.000001
    assert records[0]["time_ms"] == 0.015 and records[2]["time_ms"] == 5000.0


_TEXT = st.text(max_size=12)
_COUNT = st.integers(-(2**62), 2**62)
_RESULT = st.builds(
    SolveResult,
    status=st.sampled_from(list(Status)),
    puzzle=_TEXT,
    solution=st.none() | _TEXT,
    cost=st.none() | _COUNT,
    solver=st.none() | st.sampled_from(["propagation", 'an"neal', "é", ""]),
    elapsed=st.floats(allow_nan=True, allow_infinity=True) | st.floats(0, 1e6),
    nodes=_COUNT,
    guesses=_COUNT,
    restarts=_COUNT,
    error=st.none() | _TEXT,
    counters=st.sampled_from(
        [{}, {"propagation": {"nodes": 3, "guesses": 1, "time_ms": 0.015}}, {"x": {"y": "z\n"}}]
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_RESULT, min_size=1, max_size=8), st.text(max_size=20), st.integers(0, 2**40))
def test_records_rendered_into_a_buffer_of_their_bound_fill_it_at_most_and_match_the_python_ones(
    results, input_name, first
):
    from pipeline.engine.render.jsonl import csv_bound, csv_into, jsonl_bound, render_csv, render_into

    cols = columns([r.puzzle for r in results], results)
    index = np.arange(first, first + len(results), dtype=np.int64)
    line = index * 3 + 1
    for bound, into, expect in (
        (jsonl_bound, render_into, render_py(input_name, index.tolist(), line.tolist(), cols) + b"\n"),
        (csv_bound, csv_into, render_csv(cols, input_name, index, line)),
    ):
        size = bound(cols, input_name, index, line)
        out = np.full(size + 64, 0xAB, dtype=np.uint8)  # a guard past the bound: never written
        used = into(cols, input_name, index, line, out[:size])
        assert out[:used].tobytes() == expect and (out[size:] == 0xAB).all()


def test_a_solved_result_whose_cost_is_not_zero_is_written_as_an_error():
    results = [
        SolveResult(Status.SOLVED, "..", solution="12", cost=3, solver="liar"),
        SolveResult(Status.SOLVED, "..", solution=None, cost=0, solver="liar"),
    ]
    records = [
        json.loads(line)
        for line in render_py("in", [0, 1], [1, 2], columns(["..", ".."], results)).split(b"\n")
    ]
    assert [r["status"] for r in records] == ["error", "error"]
    assert all(r["solution"] is None and r["cost"] is None and "liar" in r["error"] for r in records)


def test_a_chunk_whose_solver_fails_answers_every_puzzle_with_an_error_instead_of_raising(monkeypatch):
    def broken(*args, **kwargs):
        raise MemoryError("out of memory")

    monkeypatch.setattr(solvers.api, "solve_many", broken)
    result = solve_chunk(task_of(LINES[:5]))
    records = [json.loads(line) for line in result.lines()]
    assert [r["status"] for r in records] == ["error"] * 5
    assert records[0]["error"] == "MemoryError: out of memory"


def test_a_chunk_whose_batch_fails_logs_why_in_one_line_before_solving_puzzle_by_puzzle(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise MemoryError("out of memory")

    monkeypatch.setattr(solvers.api, "solve_many", broken)
    with caplog.at_level(logging.WARNING, "pipeline.engine.solve"):
        solve_chunk(task_of(LINES[:5], chunk=7))
    lines = [r.getMessage() for r in caplog.records if r.name == "pipeline.engine.solve"]
    assert len(lines) == 1 and "chunk 7" in lines[0] and "out of memory" in lines[0], lines


def test_unknown_portfolio_names_become_error_results_naming_the_portfolio():
    records = [json.loads(x) for x in solve_chunk(task_of(LINES[:2], portfolio="no-such")).lines()]
    assert {r["status"] for r in records} == {"error"} and "no-such" in records[0]["error"]


def test_producer_answers_are_invalid_records_with_line_and_reason():
    result = answered_chunk(
        JOB, 3, "f.txt", [4, 9], [5, 12], ["abc", "1" * 81], ["too short", "row 1 has 9 1s"]
    )
    records = [json.loads(line) for line in result.lines()]
    assert [(r["index"], r["line"], r["status"], r["error"]) for r in records] == [
        (4, 5, "invalid", "too short"),
        (9, 12, "invalid", "row 1 has 9 1s"),
    ]
    assert result.header.stats.worker == "producer" and result.header.stats.counts == {"invalid": 2}


def test_a_chunk_result_survives_encoding_and_decoding():
    result = solve_chunk(task_of(LINES[:3]))
    again = Part.decode(result.encode())
    assert again.records == result.records and again.header == result.header
    assert again.indices() == [0, 1, 2]


def test_chunk_seeds_are_stable_positive_and_differ_between_chunks():
    assert chunk_seed(JOB, 0) == chunk_seed(JOB, 0) == 1 | (chunk_seed(JOB, 0))
    assert len({chunk_seed(JOB, c) for c in range(100)}) == 100
    assert all(0 < chunk_seed(JOB, c) < 2**62 for c in range(100))


@given(st.lists(st.integers(0, 5), max_size=50).map(lambda steps: list(np.cumsum([s + 1 for s in steps]))))
def test_runs_compress_increasing_integers_and_expand_back(values):
    runs = to_runs(values)
    assert expand_runs(runs) == [int(v) for v in values]
    assert all(count >= 1 for _, count in runs)


@given(
    st.lists(
        st.lists(st.text("12.", min_size=1, max_size=5), min_size=1, max_size=3).map("\n".join), max_size=8
    )
)
def test_puzzle_texts_with_several_rows_travel_joined_and_come_back_whole(texts):
    joined, spans = join_texts(texts)
    assert split_texts(joined, spans, len(texts)) == texts


def test_the_task_payload_refuses_unknown_fields_and_bad_job_ids():
    with pytest.raises(ValueError):
        ChunkTask(job="../etc", chunk=0, input="x", index_runs=[], line_runs=[], puzzles="")
    with pytest.raises(ValueError):
        ChunkTask.model_validate({**task_of(LINES[:1]).model_dump(), "pickle": "yes"})


# Puzzles the fast path of `backtracking` leaves (72-154k nodes against its 48k), each solved in milliseconds
# (tdoku's forum hardest).
BEYOND_THE_FAST_PATH = [
    "98.7..6..75..4......3..8.7.5....7.3...94.........2.1..3.......1.9...5.8...52....6",
    "98.7..6..75..4......3..8.7.8....9.5..3.2..1.....4....6.7...4.3....8..4......1...2",
    "98.7..6..7.5....9..43.....78..2....6..7.1..2......48..3..9...6.....5.3.......1..9",
    "98.7..6..5...9..7...7..4...4...327....65...9.......3.11...8.5...2.........54...8.",
    "98.7..6..5...8..7...7..4...32.........94...6.....13....9..4.2....58...9......6..1",
    "........1.....2.3...4.5.6.....3...7...8.674...7...1..2..5......69..84...84....9..",
]


class NoHelper:
    """An escalation that races every puzzle the first pass leaves, with no helper to call."""

    ends: dict = {}

    def racing(self, row: int):
        from contextlib import nullcontext

        from solvers.kernel.stop import new_flag

        return nullcontext(new_flag())


def test_puzzles_raced_past_the_first_pass_are_published_together_not_a_part_each():
    """Issue 31: each raced puzzle was a part of its own, and so was each run of first-pass rows between
    two of them (`--portfolio backtracking`: 2,296 part files for 4,000 rows). The first pass is one part,
    at once; raced puzzles that end within a second of each other are one more, every row in one part."""
    from pipeline.engine.solve import solve_parts

    easy = LINES[14:30] + LINES[31:40]  # within the fast path's budget
    texts = []
    for i, hard in enumerate(BEYOND_THE_FAST_PATH):  # scattered among easy ones
        texts += easy[3 * i : 3 * i + 3] + [hard]
    seed0 = {"seeded": False}  # the node counts above are those of the fixed order
    task = chunk_task(JOB, texts, portfolio="backtracking", escalate_after=2.0, **seed0)
    parts: list[Part] = []
    solve_parts(task, list(range(len(texts))), parts.append, escalation=NoHelper())
    assert len(parts) <= 3, [(p.part, len(p)) for p in parts]
    assert parts[0].row_runs() == [(4 * i, 3) for i in range(len(BEYOND_THE_FAST_PATH))]  # the first pass
    rows = sorted(r for p in parts for first, n in p.row_runs() for r in range(first, first + n))
    assert rows == list(range(len(texts)))
    records = sorted((json.loads(line) for p in parts for line in p.lines()), key=lambda r: r["index"])
    assert [r["puzzle"] for r in records] == texts and {r["status"] for r in records} == {"solved"}
    for part in parts:  # each part's records are its rows', in order
        assert [r["index"] for r in map(json.loads, part.lines())] == [
            r for first, n in part.row_runs() for r in range(first, first + n)
        ]
