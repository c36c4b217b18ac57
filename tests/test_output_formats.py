"""CSV and Parquet are rendered from the result columns and hold the same records as JSON Lines.

A chunk that came as rendered records (an older worker, or a result read once already) is
read through its JSON lines instead; both paths must write the same rows.
"""

from __future__ import annotations

import csv
import gzip
import io
import json

import numpy as np
import pytest

from client.cli import main
from pipeline.contract.part import Part
from pipeline.engine.render import rows
from pipeline.engine.solve import build_result, solve_chunk
from solvers.fields import CSV_HEADER, NAMES
from solvers.model.result import SolveResult, Status
from tests.conftest import SAMPLE, chunk_task

LINES = SAMPLE.read_text().splitlines()
JOB = "5e" * 16


def render_csv(result, start, stop, header):
    """Rows `start:stop` of a part as CSV text through the format registry (after the header when asked)."""
    return (CSV_HEADER if header else "") + b"".join(rows(result, start, stop, "csv")).decode()


def mixed_chunk() -> Part:
    """A chunk result of every status, texts that need quoting, and counters of every kind."""
    simple = {"propagation": {"nodes": 3, "guesses": 1, "time_ms": 0.015}}
    results = [
        SolveResult(Status.SOLVED, "..", "12", 0, "propagation", 1.5e-5, 3, counters=simple),
        SolveResult(Status.APPROXIMATE, '"q,\\', "1\t2", 4, 'an"neal', 2.0, restarts=7, counters={"x": {}}),
        SolveResult(Status.TIMEOUT, "x\ny", error="no solution", elapsed=5.0, solver="propagation"),
        SolveResult(Status.INVALID, "é\x01", error="cell 1: unknown symbol 'é'"),
        SolveResult(Status.ERROR, "", error="boom", elapsed=float("nan")),
        SolveResult(Status.UNSOLVABLE, "7", solver="dlx", elapsed=1e-9, nodes=5, guesses=2),
    ]
    texts = [r.puzzle for r in results]
    return build_result(JOB, 0, 'dir/ä "in".txt', [(7, 6)], [(1, 2), (5, 4)], texts, results)


@pytest.mark.parametrize("rows", [(0, 6), (2, 5)])
def test_csv_from_the_columns_is_the_csv_of_the_json_records(rows):
    start, stop = rows
    from_columns = render_csv(mixed_chunk(), start, stop, header=True)
    python = io.StringIO()
    writer = csv.writer(python, lineterminator="\n")
    writer.writerow(NAMES)
    for line in mixed_chunk().lines()[start:stop]:
        data = json.loads(line)
        data["counters"] = json.dumps(data["counters"], separators=(",", ":"), ensure_ascii=False)
        writer.writerow(["" if data[k] is None else data[k] for k in NAMES])
    assert from_columns == python.getvalue()  # the compiled writer writes what Python's csv module does
    parsed = list(csv.DictReader(io.StringIO(from_columns)))
    assert [r["status"] for r in parsed] == [
        "solved",
        "approximate",
        "timeout",
        "invalid",
        "error",
        "unsolvable",
    ][start:stop]


def test_a_solved_chunk_renders_the_same_rows_as_csv_as_its_records():
    result = solve_chunk(chunk_task(JOB, LINES[:30]))
    table = list(csv.DictReader(io.StringIO(render_csv(result, 0, 30, header=True))))
    for row, line in zip(table, result.lines(), strict=True):
        record = json.loads(line)
        assert row["puzzle"] == record["puzzle"] and row["solution"] == record["solution"]
        assert (
            float(row["time_ms"]) == record["time_ms"] and json.loads(row["counters"]) == record["counters"]
        )


def parquet_rows(path) -> list[dict]:  # noqa: ANN001 - a path
    pq = pytest.importorskip("pyarrow.parquet")
    return pq.read_table(path).to_pylist()


def test_parquet_holds_the_json_lines_records_with_their_types_and_nulls(tmp_path):
    pytest.importorskip("pyarrow")
    from pipeline.engine.render.parquet import ParquetSink

    for result in (mixed_chunk(), solve_chunk(chunk_task(JOB, LINES[:20]))):
        path = tmp_path / "out.parquet"
        with path.open("wb") as f:
            sink = ParquetSink(f)
            sink.write(result, 0, 1)
            sink.write(result, 1, len(result))  # two row groups, as a collection writes slices
            sink.close()
        records = [json.loads(line) for line in result.lines()]
        rows = parquet_rows(path)
        for row in rows:
            row["counters"] = json.loads(row["counters"])
        assert rows == records


def test_solve_writes_parquet_and_refuses_it_in_one_line_without_pyarrow(tmp_path, capsys, monkeypatch):
    pytest.importorskip("pyarrow")
    corpus = tmp_path / "in.txt"
    corpus.write_text("\n".join(LINES[:40] + ["not a puzzle"]) + "\n")
    out = tmp_path / "out.parquet"
    assert main(["solve", str(corpus), "-o", str(out), "--format", "parquet", "--ordered", "-q"]) == 0
    rows = parquet_rows(out)
    assert [r["puzzle"] for r in rows] == LINES[:40] + ["not a puzzle"]
    assert rows[-1]["status"] == "invalid" and rows[-1]["solution"] is None and rows[-1]["cost"] is None
    assert np.isclose(rows[0]["time_ms"], rows[0]["time_ms"]) and rows[0]["cost"] == 0
    capsys.readouterr()

    import pipeline.engine.render.parquet as parquet

    monkeypatch.setattr(parquet, "available", lambda: False)
    other = tmp_path / "other.parquet"
    assert main(["solve", str(corpus), "-o", str(other), "--format", "parquet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'sudoku-batch[parquet]'" in err
    assert not other.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.parquet"]


@pytest.mark.parametrize(
    ("name", "given", "rows_of"),
    [
        ("out.csv", None, lambda b: list(csv.DictReader(io.StringIO(b.decode())))),
        ("out.CSV.gz", None, lambda b: list(csv.DictReader(io.StringIO(gzip.decompress(b).decode())))),
        ("out.jsonl.gz", None, lambda b: [json.loads(x) for x in gzip.decompress(b).splitlines()]),
        ("out.json", None, lambda b: [json.loads(x) for x in b.splitlines()]),
        ("out.txt", None, lambda b: [json.loads(x) for x in b.splitlines()]),
        ("out.txt", "csv", lambda b: list(csv.DictReader(io.StringIO(b.decode())))),
        ("out.gz", "csv", lambda b: list(csv.DictReader(io.StringIO(gzip.decompress(b).decode())))),
    ],
)
def test_the_output_format_follows_the_file_name_and_gz_compresses_it(name, given, rows_of, tmp_path, capsys):
    corpus = tmp_path / "in.txt"
    corpus.write_text("\n".join(LINES[:30]) + "\n")
    out = tmp_path / name
    fmt = ["--format", given] if given else []
    assert main(["solve", str(corpus), "-o", str(out), *fmt, "--ordered", "-q", "--workers", "1"]) == 0
    rows = rows_of(out.read_bytes())
    assert [r["puzzle"] for r in rows] == LINES[:30] and rows[0]["status"] == "solved"


@pytest.mark.parametrize(
    ("name", "given", "message"),
    [
        ("out.csv", "jsonl", "-o {out} names csv, not --format jsonl: drop one or rename the file"),
        ("out.jsonl.gz", "parquet", "-o {out} names jsonl, not --format parquet"),
        ("out.parquet.gz", None, "-o {out}: Parquet compresses inside the file; name it .parquet, not .gz"),
    ],
)
def test_a_file_name_that_contradicts_the_format_is_a_usage_error(name, given, message, tmp_path, capsys):
    out = tmp_path / name
    fmt = ["--format", given] if given else []
    assert main(["solve", str(SAMPLE), "-o", str(out), *fmt]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"sudoku-batch: error: {message.format(out=out)}"), err
    assert len(err.splitlines()) == 1 and not out.exists()
