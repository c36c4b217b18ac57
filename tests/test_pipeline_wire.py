"""Result columns on the wire (`pipeline.contract.wire`): what workers send and collectors render.

The wire form must render exactly the records the worker would have rendered, be much
smaller than them, and refuse any payload whose parts disagree before the unchecked
renderer reads it. Status codes are fixed values, whatever the order of `Status`.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline.contract.part import Part, VersionMismatch
from pipeline.contract.tasks import VERSION
from pipeline.contract.wire import from_bytes, read_column, to_bytes
from pipeline.engine.render.jsonl import render as render_packed
from pipeline.engine.solve import solve_chunk
from solvers.model.columns import Column, ResultColumns
from solvers.model.result import SolveResult
from solvers.model.status import STATUS_CODE, STATUS_NAMES, Status
from tests.conftest import SAMPLE, chunk_task, failed_chunk
from tests.jsonl_reference import render_py

LINES = SAMPLE.read_text().splitlines()
JOB = "cd" * 16
ROWS_4 = "1 . . .\n. . 3 .\n. 4 . .\n. . . 2"


def mixed_results() -> list[SolveResult]:
    """One result of every status, with texts that need escaping and counters of every kind."""
    simple = {"propagation": {"nodes": 3, "guesses": 1, "time_ms": 0.015}}
    return [
        SolveResult(Status.SOLVED, "..", "12", 0, "propagation", 1.5e-5, 3, counters=simple),
        SolveResult(
            Status.APPROXIMATE, '"q\\', "1\t2", 4, 'an"neal', 2.0, restarts=7, counters={"x": {"y": 1}}
        ),
        SolveResult(Status.TIMEOUT, "x\ny", error="no solution", elapsed=5.0, solver="propagation"),
        SolveResult(Status.INVALID, "é\x01", error="cell 1: unknown symbol 'é'"),
        SolveResult(Status.ERROR, "", error="boom", elapsed=float("nan")),
        SolveResult(Status.UNSOLVABLE, "7", solver="dlx", elapsed=1e-9, nodes=5, guesses=2),
    ]


def pack(results: list[SolveResult]) -> ResultColumns:
    """The columns of `results` (their puzzles as the texts)."""
    return ResultColumns.build([r.puzzle for r in results], results)


def test_packed_results_render_the_same_bytes_as_the_python_renderer_after_a_round_trip():
    results = mixed_results()
    index, line = np.arange(7, 13, dtype=np.int64), np.array([1, 3, 5, 8, 9, 100], dtype=np.int64)
    expected = render_py('dir/ä "in".txt', index.tolist(), line.tolist(), pack(results))
    for payload in (to_bytes(pack(results)), bytearray(to_bytes(pack(results)))):
        assert render_packed(from_bytes(payload, 6), 'dir/ä "in".txt', index, line) == expected


def test_status_codes_on_the_wire_are_the_fixed_values_not_positions_in_the_enum():
    assert STATUS_CODE == {
        Status.SOLVED: 0,
        Status.UNSOLVABLE: 1,
        Status.TIMEOUT: 2,
        Status.APPROXIMATE: 3,
        Status.INVALID: 4,
        Status.ERROR: 5,
    }  # what workers of every version write: never renumber, only add
    assert STATUS_NAMES == ["solved", "unsolvable", "timeout", "approximate", "invalid", "error"]
    results = mixed_results()
    assert [STATUS_NAMES[c] for c in pack(results).status] == [r.status.value for r in results]


def test_a_column_a_payload_lacks_reads_as_its_default_and_a_part_it_does_not_know_is_ignored():
    later = Column("later", "later", "int", np.int64, default=7, required=False)
    assert read_column(later, {}, 6).tolist() == [7] * 6  # a worker of before the column was added
    payload = to_bytes(pack(mixed_results()))
    head, _, body = payload.partition(b"\n")
    layout = json.loads(head)
    layout["parts"].append(["added_later", "|u1", 6])  # a worker of after
    newer = json.dumps(layout).encode() + b"\n" + body + bytes(6)
    assert from_bytes(newer, 6).status.tolist() == from_bytes(payload, 6).status.tolist()


def untimed(result: Part) -> list[dict]:
    """A chunk's records without the fields that hold measured times."""
    timed = ("time_ms", "counters")
    return [{k: v for k, v in json.loads(x).items() if k not in timed} for x in result.lines()]


@pytest.mark.parametrize("texts", [LINES[:50], LINES[50:53] + [ROWS_4, "1" * 81]])
def test_a_part_rendered_where_it_was_solved_holds_the_records_its_columns_render(texts):
    rendered = solve_chunk(chunk_task(JOB, texts, format="jsonl"))
    packed = solve_chunk(chunk_task(JOB, texts))
    assert rendered.header.format == "jsonl" and rendered.columns is None
    assert packed.header.format == "columns" and packed.columns is not None
    for decoded in (Part.decode(packed.encode()), Part.decode(bytearray(packed.encode()))):
        assert untimed(decoded) == untimed(Part.decode(rendered.encode()))  # but for measured times
        assert decoded.header.stats.counts == rendered.header.stats.counts


def test_a_packed_9x9_answer_is_under_half_the_size_of_its_records():
    result = solve_chunk(chunk_task(JOB, LINES[:200]))
    payload = result.encode()
    assert len(payload) < 0.5 * len(Part.decode(payload).records)


def test_a_part_of_another_protocol_version_is_refused_naming_both_versions():
    payload = solve_chunk(chunk_task(JOB, LINES[:5])).encode()
    head, _, body = payload.partition(b"\n")
    older = json.dumps({**json.loads(head), "v": VERSION - 1}).encode()
    with pytest.raises(VersionMismatch, match=f"version {VERSION - 1}, not {VERSION}"):
        Part.decode(older + b"\n" + body)


def test_results_the_producer_and_failures_answer_travel_as_columns_too_and_render_the_same():
    result = failed_chunk(
        chunk_task(JOB, LINES[:3]), "the chunk exceeded the worker's time limit", Status.TIMEOUT
    )
    assert result.header.v == VERSION and result.columns is not None  # one path: built without numba
    assert [json.loads(x)["status"] for x in Part.decode(result.encode()).lines()] == ["timeout"] * 3


def corrupt(payload: bytes, how: str) -> bytes:
    """Spoil a packed payload in one way."""
    head, _, body = payload.partition(b"\n")
    layout = json.loads(head)
    if how == "truncated":
        return payload[:-3]
    if how == "trailing":
        return payload + b"\0"
    if how == "rows":
        layout["n"] += 1
    elif how == "dtype":
        layout["parts"][0][1] = "<f8"
    elif how == "missing":
        layout["parts"] = layout["parts"][:-1]
        return json.dumps(layout).encode() + b"\n" + body[: len(body) - layout_size(payload, -1)]
    elif how == "names":
        layout["names"] = []
    elif how == "tag":
        layout["wire"] = "packed0"
    return json.dumps(layout).encode() + b"\n" + body


def layout_size(payload: bytes, k: int) -> int:
    name, dtype, count = json.loads(payload.partition(b"\n")[0])["parts"][k]
    return np.dtype(dtype).itemsize * count


@pytest.mark.parametrize("how", ["truncated", "trailing", "rows", "dtype", "missing", "names", "tag"])
def test_a_packed_payload_whose_parts_disagree_is_refused_before_rendering(how):
    payload = to_bytes(pack(mixed_results()))
    with pytest.raises(ValueError, match="packed results"):
        from_bytes(corrupt(payload, how), 6)


def test_a_packed_payload_with_an_out_of_range_id_or_code_is_refused():
    results = mixed_results()
    for field, value in (
        ("solver", 9),
        ("status", 200),
        ("status", 256),
        ("counter_kind", 3),
        ("nodes", 10**17),
    ):
        packed = pack(results)
        bad = getattr(packed, field).astype(np.int64)
        bad[0] = value
        setattr(packed, field, bad)
        with pytest.raises(ValueError, match="packed results"):
            from_bytes(to_bytes(packed), 6)


def test_text_lengths_whose_sum_wraps_round_to_the_bytes_are_refused():
    packed = pack(mixed_results())
    lengths = np.array([2**64 - 1, 2, 0, 0, 0, 0], dtype=np.uint64)  # sums to 1 modulo 2**64
    packed.puzzle.buf, packed.puzzle.off = (
        np.array([65], np.uint8),
        np.concatenate((np.zeros(1, np.uint64), np.cumsum(lengths))),
    )
    with pytest.raises(ValueError, match="p lengths out of range"):
        from_bytes(to_bytes(packed), 6)


def test_a_packed_result_without_the_lines_of_its_rows_is_refused():
    result = solve_chunk(chunk_task(JOB, LINES[:3]))
    header = result.header.model_copy(update={"line_runs": [(1, 2)]})
    with pytest.raises(ValueError, match="lines"):
        Part.decode(header.model_dump_json().encode() + b"\n" + to_bytes(result.columns))


def test_a_payload_with_random_bytes_spoiled_is_refused_or_renders_one_line_per_row():
    payload = to_bytes(pack(mixed_results()))
    cut = payload.index(b"\n") + 1
    index, line = np.arange(6, dtype=np.int64), np.arange(1, 7, dtype=np.int64)
    rng = np.random.default_rng(5)
    rendered = 0
    for _ in range(300):
        spoiled = bytearray(payload)
        for at in rng.integers(cut, len(payload), size=int(rng.integers(1, 4))):
            spoiled[at] = int(rng.integers(0, 256))
        try:
            packed = from_bytes(bytes(spoiled), 6)
        except ValueError:
            continue
        assert render_packed(packed, "in", index, line).count(b"\n") == 5  # the kernel stayed in its buffer
        rendered += 1
    assert rendered > 50  # most spoiled bytes are texts and counts: they render as other values
