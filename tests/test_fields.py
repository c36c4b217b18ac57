"""The field table (`solvers.fields`) is the one description of a result: every form agrees with it.

Each renderer (the compiled JSON Lines and CSV writers, Parquet, `Record`) and each derived type
(`SolveResult`, `HelperEntry`) is checked field by field against the table, so a field added to
the table and not to a renderer, or rendered otherwise than its kind says, fails here.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json

import pytest

from pipeline.engine.render.record import Record
from pipeline.engine.solve import solve_chunk
from pipeline.escalation.task import HelperEntry
from solvers.fields import BY_NAME, CSV_HEADER, FIELDS, NAMES, RECORD_FIELDS, RESULT_ORDER, Field
from solvers.kernel.outcome import Outcome
from solvers.model.result import SolveResult
from solvers.model.status import STATUS_CODE, STATUS_NAMES, Status
from tests.conftest import SAMPLE, chunk_task
from tests.test_output_formats import mixed_chunk

LINES = SAMPLE.read_text().splitlines()
JSON_TYPES = {
    "position": int,
    "input": str,
    "text": str,
    "status": str,
    "name": str,
    "int": int,
    "fixed": float,
    "counters": dict,
}


def chunks():
    """A mixed chunk (every status, texts to escape, counters of every kind) and a solved one."""
    solved = solve_chunk(chunk_task("fe" * 16, LINES[:20] + ["1" * 81]))
    return [mixed_chunk(), solved]


def rendered(result, fmt: str) -> bytes:
    """The chunk's records in `fmt`, as its renderer writes them."""
    from pipeline.engine.render import rows

    return b"".join(rows(result, 0, len(result), fmt))


def json_rows(result) -> list[dict]:
    return [json.loads(line) for line in rendered(result, "jsonl").decode().splitlines()]


def test_the_json_records_hold_the_table_fields_in_order_with_the_values_their_kinds_say():
    for result in chunks():
        for row in json_rows(result):
            assert tuple(row) == NAMES
            for name, value in row.items():
                f = BY_NAME[name]
                if value is None:
                    assert f.nullable or f.kind in ("name", "fixed"), name
                    continue
                assert isinstance(value, JSON_TYPES[f.kind]), (name, value)
                if f.kind == "status":
                    assert value in STATUS_NAMES


def csv_cell(f, value) -> str:
    """What the table says a CSV cell of a field holds: the JSON value, nulls empty, counters as JSON text."""
    if value is None:
        return ""
    if f.kind == "counters":
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def test_the_csv_rows_are_the_json_records_rendered_as_the_table_says():
    for result in chunks():
        text = CSV_HEADER + rendered(result, "csv").decode()
        rows = list(csv.reader(io.StringIO(text)))
        assert tuple(rows[0]) == NAMES
        for got, want in zip(rows[1:], json_rows(result), strict=True):
            assert got == [csv_cell(BY_NAME[k], v) for k, v in want.items()]


def test_the_parquet_schema_and_values_follow_the_table():
    pa = pytest.importorskip("pyarrow")
    from pipeline.engine.render.parquet import schema

    types = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string()}
    assert schema() == pa.schema([(f.name, types[f.parquet]) for f in RECORD_FIELDS])
    for result in chunks():
        table = pa.ipc.open_stream(rendered(result, "parquet")).read_all()
        assert table.schema == schema()
        for got, want in zip(table.to_pylist(), json_rows(result), strict=True):
            want["counters"] = json.dumps(want["counters"], separators=(",", ":"), ensure_ascii=False)
            assert got == want


def test_records_solve_results_and_race_entries_are_built_from_the_table():
    assert tuple(f.name for f in dataclasses.fields(Record)) == NAMES
    assert tuple(f.name for f in dataclasses.fields(SolveResult)) == RESULT_ORDER
    assert set(HelperEntry.model_fields) == {"state"} | {f.name for f in FIELDS if f.posted}
    for result in chunks():
        for line in rendered(result, "jsonl").decode().splitlines():
            assert Record.from_json(line).to_dict() == json.loads(line)


def test_records_read_from_the_columns_are_their_json_lines_read_back():
    for result in chunks():
        rows = Record.rows(result.columns, result.header.input, result.row_indices(), result.row_lines())
        lines = rendered(result, "jsonl").decode().splitlines()
        assert [r.to_dict() for r in rows] == [Record.from_json(line).to_dict() for line in lines]


def test_a_field_added_to_the_table_is_a_column_of_the_parquet_table_with_no_other_edit(monkeypatch):
    pytest.importorskip("pyarrow")
    from pipeline.engine.render import parquet
    from solvers.model import frame

    fields = (*RECORD_FIELDS, Field("guesses_again", "int", column="guesses"))
    monkeypatch.setattr(parquet, "RECORD_FIELDS", fields)
    monkeypatch.setattr(frame, "RECORD_FIELDS", fields)
    table = parquet.table(mixed_chunk())
    assert table.column_names == [*NAMES, "guesses_again"]
    assert table.column("guesses_again").equals(table.column("guesses"))


def test_one_status_table_names_every_status_by_a_fixed_code():
    assert STATUS_CODE == {
        Status.SOLVED: 0,
        Status.UNSOLVABLE: 1,
        Status.TIMEOUT: 2,
        Status.APPROXIMATE: 3,
        Status.INVALID: 4,
        Status.ERROR: 5,
    }
    assert [STATUS_CODE[Status(name)] for name in STATUS_NAMES] == list(range(len(Status)))


def test_kernel_ends_summary_order_and_tally_sets_all_read_the_one_status_table():
    from client.summary import _ordered
    from solvers.model import status as table
    from solvers.model.columns import ResultColumns

    assert [r.status for r in table.STATUSES] == table.STATUS_BY_CODE and len(table.STATUSES) == len(Status)
    for outcome in Outcome:  # a kernel end without a verified grid: its status and error, from ENDS
        status, error = table.ENDS.get(outcome, table.ENDS[Outcome.BUDGET])
        if status is Status.SOLVED:  # only the verifier answers `solved`
            status, error = table.ENDS[Outcome.BUDGET]
        assert STATUS_NAMES[table.END_CODE[outcome]] == status
        code = int(table.END_ERROR[outcome])
        assert (table.END_ERRORS[code - 2] if code else None) == error
    counts = {s.value: 1 for s in reversed(Status)}
    assert (
        _ordered(counts)
        == list(table.SUMMARY_ORDER)
        == [r.status for r in sorted(table.STATUSES, key=lambda r: r.order)]
    )
    results = [
        SolveResult(
            s,
            "1" * 81,
            solver="x",
            solution="1" * 81 if s == "solved" else None,
            cost=0 if s == "solved" else None,
        )
        for s in Status
    ]
    tally = ResultColumns.build(["1" * 81] * len(results), results).tally()
    assert tally.wins == {"x": sum(r.answered for r in table.STATUSES)}
    assert tally.problem_rows == [i for i, s in enumerate(Status) if table.STATUSES[STATUS_CODE[s]].problem]


def test_a_race_reports_its_decided_end_and_its_members_states_from_the_status_table():
    from solvers.model.parse import parse_puzzle
    from solvers.model.status import ENDS, MemberState
    from solvers.race.portfolio import PRESETS, PortfolioSpec, race

    spec = PortfolioSpec(name="t", members=PRESETS["race"].members, fast_nodes=1)  # the members race
    won = race(parse_puzzle(LINES[0]), spec, time_limit=20, seed=1)
    assert won.status == ENDS[Outcome.SOLVED][0] and won.counters[won.solver]["status"] == MemberState.SOLVED
    assert {c["status"] for c in won.counters.values()} <= set(MemberState)


def test_the_columns_of_results_are_its_own_number_arrays_and_its_object_rows_leave_them_untouched():
    from solvers.api import solve_many
    from solvers.model.columns import NUMBERS, ResultColumns

    results = solve_many(LINES[:5])
    columns = ResultColumns.build(results.texts, results)
    assert all(getattr(columns, c.name) is getattr(results.numbers, c.name) for c in NUMBERS)  # no copy
    before = {c.name: getattr(results.numbers, c.name).copy() for c in NUMBERS}
    results[1].status, results[1].solver, results[1].nodes = Status.ERROR, "edited", 7  # read, then edited
    columns = ResultColumns.build(results.texts, results)
    assert (STATUS_NAMES[columns.status[1]], columns.names[columns.solver[1]], columns.nodes[1]) == (
        "error",
        "edited",
        7,
    )
    assert all((getattr(results.numbers, name) == kept).all() for name, kept in before.items())


def test_a_time_held_in_ns_prints_the_time_ms_its_seconds_printed_to_a_tenth_of_a_microsecond():
    import numpy as np

    from pipeline.engine.render.jsonl import render
    from solvers.model.columns import ResultColumns

    rng = np.random.default_rng(7)
    starts = 1000.0 + rng.random(20_000)
    elapsed = (starts + rng.random(20_000) * 1e-3) - starts  # as perf_counter differences: ties at 0.1 µs
    results = [SolveResult(Status.TIMEOUT, "x", elapsed=float(e)) for e in elapsed]
    index = np.arange(len(results), dtype=np.int64)
    lines = render(ResultColumns.build(["x"] * len(results), results), "in", index, index + 1).decode()
    expected = np.rint(elapsed * 1000.0 * 10.0**4) / 10.0**4  # the digits of ms held in fixed point
    assert [json.loads(line)["time_ms"] for line in lines.splitlines()] == expected.tolist()


def test_the_compiled_writers_take_each_record_fields_arguments_in_the_tables_order():
    import inspect

    import numpy as np

    from pipeline.engine.render import jsonl, writers
    from solvers.model.texts import Texts

    columns = mixed_chunk().columns
    index = np.arange(len(columns), dtype=np.int64)
    names = Texts.of(columns.names)
    args = list(jsonl.record_args(columns, np.zeros(1, np.uint8), index, index + 1, names, names))
    for kernel in (writers.write_jsonl, writers.write_csv):  # a field in the table, not in a writer, fails
        assert list(inspect.signature(kernel.py_func).parameters)[: len(args)] == args, kernel.__name__


def test_the_compiled_writers_are_the_ones_generated_from_the_table():
    from pathlib import Path

    from pipeline.engine.render import put, writers

    assert Path(writers.__file__).read_text() == put.writers_source(), "python -m pipeline.engine.render.put"


def test_a_field_added_to_the_table_is_a_line_of_each_generated_writer(monkeypatch):
    from pipeline.engine.render import put

    fields = (*RECORD_FIELDS, Field("guesses_again", "int", column="guesses"))
    monkeypatch.setattr(put, "RECORD_FIELDS", fields)
    lines = [line.strip() for line in put.writers_source().splitlines() if "guesses_again[i]" in line]
    assert len(lines) == 2 and lines[0].startswith("pos = put_int(out, put_key(out, pos, "), lines
    assert lines[1] == "pos = put_int(out, comma(out, pos), guesses_again[i])"
