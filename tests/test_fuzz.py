"""Fuzzing the input parser, the producer's reader and the task payload decoder (hypothesis).

Random bytes, NUL bytes, wrong encodings, huge lines, grids over 64x64, truncated gzip
and random JSON messages each give an `invalid` result or a one-line error: never an
exception out of the reader, the solver API or the worker's task, and never a hang.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pipeline.contract.tasks import ChunkTask
from pipeline.engine.reader import read_blocks
from pipeline.engine.solve import solve_chunk
from solvers.api import solve_many
from tests.conftest import SAMPLE, cli_command

LINES = SAMPLE.read_text().splitlines()
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
JOB = "0d" * 16

grid_chars = st.sampled_from(list("0123456789.-_*xX ,|+\t\x00\u00e9\u2603\ufffdABCDEFGabcdefg"))
puzzle_like = st.one_of(
    st.text(grid_chars, max_size=300),
    st.integers(2, 70).map(lambda side: "." * (side * side)),  # every square size, 65 and more included
    st.text(max_size=200),  # any unicode, surrogates excepted
    st.sampled_from(LINES[:20]).flatmap(
        lambda line: st.tuples(st.integers(0, len(line)), st.text(grid_chars, max_size=3)).map(
            lambda cut: line[: cut[0]] + cut[1] + line[cut[0] + 1 :]
        )
    ),
)


def all_records(data: bytes) -> list[tuple[int, str, str | None]]:
    """(line, text, error) of everything the reader makes of `data`."""
    out = []
    for block in read_blocks(io.BytesIO(data), None):
        assert len(block.lines) == len(block.texts) == len(block.errors)
        out += list(zip(block.lines, block.texts, block.errors, strict=True))
    return out


@FUZZ
@given(st.binary(max_size=4000))
def test_the_reader_turns_any_bytes_into_puzzles_or_one_line_reasons(data):
    for line, text, error in all_records(data):
        assert line >= 1 and isinstance(text, str)
        assert error is None or (error and "\n" not in error and len(error) < 1000)


@FUZZ
@given(st.lists(puzzle_like, min_size=1, max_size=8), st.sampled_from(["utf-8", "latin-1", "utf-16"]))
def test_the_reader_and_the_solvers_answer_every_line_in_any_encoding(lines, encoding):
    data = "\n".join(lines).encode(encoding, errors="replace") + b"\n"
    for _, text, error in all_records(data):
        if error is None:
            (result,) = solve_many([text], time_limit=1.0)
            assert result.status.value in ("solved", "unsolvable", "timeout", "invalid", "approximate")
            assert result.error is None or "\n" not in result.error


@FUZZ
@given(st.lists(puzzle_like, min_size=1, max_size=12))
def test_solve_many_answers_each_line_and_never_raises(lines):
    results = solve_many(lines, time_limit=1.0)
    assert len(results) == len(lines)
    for r in results:
        if r.status.value == "invalid":
            assert r.error and "\n" not in r.error


@FUZZ
@given(st.integers(1, 2000), st.integers(0, 9))
def test_a_truncated_gzip_input_ends_with_a_one_line_error_not_a_crash(cut, level):
    raw = gzip.compress(("\n".join(LINES[:60]) + "\n").encode(), compresslevel=level)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cut.txt.gz"
        path.write_bytes(raw[: min(cut, len(raw) - 1)])
        records = [r for b in read_blocks(str(path), None) for r in zip(b.texts, b.errors, strict=True)]
    assert all(e is None or "\n" not in e for _, e in records)
    assert [t for t, e in records if e is None] == LINES[: len([t for t, e in records if e is None])]


def test_the_cli_reports_a_truncated_gzip_in_the_output_and_exits(tmp_path):
    raw = gzip.compress(("\n".join(LINES[:300]) + "\n").encode())
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(raw[: len(raw) // 2])
    out = tmp_path / "out.jsonl"
    proc = subprocess.run(
        [*cli_command(), "solve", str(path), "-o", str(out), "-q", "--workers", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) <= 1
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    assert (
        any(r["status"] == "invalid" and "cannot be read" in r["error"] for r in records) or proc.returncode
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=50),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=6)
    ),
    max_leaves=30,
)
task_like = st.fixed_dictionaries(
    {
        "job": st.one_of(st.just(JOB), st.text(max_size=70)),
        "chunk": st.one_of(st.integers(-3, 3), json_values),
        "input": st.one_of(st.just("in.txt"), json_values),
        "index_runs": st.one_of(
            st.lists(st.tuples(st.integers(-2, 5), st.integers(-2, 5)), max_size=3), json_values
        ),
        "line_runs": st.one_of(
            st.lists(st.tuples(st.integers(-2, 5), st.integers(-2, 5)), max_size=3), json_values
        ),
        "puzzles": st.one_of(st.lists(puzzle_like, max_size=5).map("\n".join), json_values),
    },
    optional={
        "spans": st.one_of(st.none(), st.lists(st.integers(-1, 3), max_size=5), json_values),
        "box": st.one_of(st.none(), st.sampled_from(["2x3", "3x3", "0x0", "x", "99x99"]), json_values),
        "time_limit": st.one_of(st.none(), st.floats(), json_values),
        "portfolio": st.one_of(st.none(), st.sampled_from(["fast", "race", "nope", ""]), json_values),
        "seed": st.one_of(st.integers(-5, 2**64), json_values),
        "v": json_values,
    },
)


@FUZZ
@given(st.one_of(task_like, json_values))
def test_the_task_decoder_refuses_or_answers_every_puzzle_of_any_json_message(payload):
    try:
        task = ChunkTask.model_validate(payload)
    except ValidationError:
        return
    result = solve_chunk(task)
    assert len(result) == len(task) == len(result.lines())
    for line in result.lines():
        record = json.loads(line)
        assert record["error"] is None or "\n" not in record["error"]


@FUZZ
@given(payload=st.one_of(task_like, json_values))
def test_the_worker_task_never_raises_on_a_hand_made_message(fake_redis_module, payload):
    tasks = fake_redis_module
    answered = tasks.solve_chunk_task.run(payload)
    assert isinstance(answered, int) and answered >= 0


@pytest.fixture(scope="module")
def fake_redis_module():
    """worker.tasks with its Redis connection replaced by one fakeredis for the module."""
    import fakeredis

    tasks = pytest.importorskip("worker.tasks")
    client = fakeredis.FakeRedis()
    client.hset(f"sbatch:job:{JOB}:meta", "created", "1")
    saved = tasks.store_client
    tasks.store_client = lambda: client
    yield tasks
    tasks.store_client = saved
