"""Results as a DataFrame: `Job.to_arrow/to_pandas/to_polars` and the same on `solve_many`'s `Results`.

What holds them: the table is the Parquet output's (names, types and values) for the same job,
whatever format its parts were solved in, embedded and through a broker, read again later; its
records are `Job.results()`'s; and a missing pyarrow, pandas or polars is one line naming the extra.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from client import BatchClient
from client.frame import csv_table, part_table, slices_table
from client.output import Output
from client.transport import INLINE_BYTES
from pipeline.contract.part import Part
from pipeline.engine.render.jsonl import counters_texts
from pipeline.engine.render.parquet import records_table
from pipeline.engine.solve import build_part
from solvers.api import solve_many
from solvers.model.columns import ResultColumns
from solvers.model.frame import columns_table, schema
from solvers.model.result import SolveResult, Status
from tests.conftest import REPO, SAMPLE
from tests.test_portfolio import FRISCH

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")

PUZZLES = SAMPLE.read_text().split()[:60]
ODD = ['bad,"q"\tline', "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..7ü"]
LINES = [*PUZZLES[:30], *ODD, *PUZZLES[30:]]  # invalid lines among the puzzles: quotes, a tab, UTF-8
NAME = 'in,"put" ü.txt'  # a name CSV quotes and JSON escapes
FORMATS = ("columns", "jsonl", "csv", "parquet")
VARYING = ["time_ms", "counters"]  # what differs between two solves of the same puzzles


def pipeline_table(results, input_name: str = "<strings>"):  # noqa: ANN001, ANN201 - Results, a table
    """The Parquet writer's table of `results` as a worker would send it (rows 0.., lines 1..)."""
    index = np.arange(len(results), dtype=np.int64)
    columns = ResultColumns.build(results.texts, results)
    return records_table(columns, input_name, index, index + 1)  # its counters: the compiled writer's


def parquet_output(job, path: Path):  # noqa: ANN001, ANN201 - a Job, a table
    """The job written as the CLI writes `-o out.parquet --ordered` (client.output), read back."""
    out = Output(str(path), "parquet")
    for result, start, stop in job.chunks(ordered=True):
        out.write(result, start, stop)
    out.close(keep=True)
    return pq.read_table(path)


def records(job) -> list[dict]:  # noqa: ANN001 - a Job
    """`Job.results()` in input order, as dicts."""
    return [r.to_dict() for r in job.results(ordered=True)]


def table_records(table) -> list[dict]:  # noqa: ANN001 - a table
    """The table's rows as dicts, `counters` read from its JSON text (a record holds the object)."""
    return [{**r, "counters": json.loads(r["counters"])} for r in table.to_pylist()]


@pytest.mark.parametrize(
    ("lines", "options"),
    [
        (PUZZLES, {}),  # one kernel batch: the solutions a block of symbols
        (LINES, {}),  # invalid lines born as objects among the columns
        (LINES, {"limit": 2}),  # counting solutions
        ([FRISCH, *ODD, PUZZLES[0]], {"portfolio": "race", "time_limit": 0.3}),  # a raced row, its counters
    ],
    ids=["batch", "invalid", "counting", "raced"],
)
def test_results_to_arrow_is_the_parquet_table_the_pipeline_makes_of_the_same_results(lines, options):
    results = solve_many(lines, **options)
    table = results.to_arrow()
    expected = pipeline_table(results)
    assert table.schema.equals(schema()) and table.schema.names == expected.schema.names
    assert table.equals(expected)
    for row, result in zip(table.to_pylist(), results, strict=True):  # each row is its SolveResult
        fields = ("puzzle", "solution", "cost", "solver", "error", "nodes", "guesses", "restarts")
        assert row["status"] == result.status.value
        assert [row[k] for k in fields] == [getattr(result, k) for k in fields]
        assert (
            abs(row["time_ms"] - result.elapsed * 1000) <= 5e-5 + 1e-9
        )  # 0.1 µs: half a unit, a float error


def test_results_to_pandas_and_to_polars_are_what_they_read_from_the_same_table_as_parquet(tmp_path):
    results = solve_many(LINES)
    path = tmp_path / "out.parquet"
    pq.write_table(pipeline_table(results, NAME), path)
    pd.testing.assert_frame_equal(results.to_pandas(NAME), pd.read_parquet(path))
    assert results.to_polars(NAME).equals(pl.read_parquet(path))
    assert str(results.to_pandas(NAME)["cost"].dtype) == "float64"  # an invalid line's cost is null


@pytest.mark.parametrize(
    "counters",
    [
        {},
        {"propagation": {"nodes": 3, "guesses": 1, "time_ms": 0.00001}},  # 1e-05: written as 0.00001
        {"propagation": {"nodes": 3, "guesses": 1, "time_ms": 1234.5}},
        {'sät "x"': {"nodes": 3, "guesses": 1, "time_ms": 2.0}},  # a name JSON escapes, UTF-8 kept
        {"sat": {"nodes": np.int64(5), "guesses": 0, "time_ms": 1.0, "conflicts": 9}},  # more than three
        {"sat": {"nodes": 1, "guesses": 0, "time_ms": 1.0}, "annealing": {"nodes": 2}},  # two members
    ],
)
def test_the_arrow_tables_counters_are_what_the_compiled_writer_writes_for_them(counters):
    result = SolveResult(Status.SOLVED, "x", "y", 0, "sat", 0.001, 1, 0, 0, None, None, counters)
    columns = ResultColumns.build(["x"], [result])
    row = np.zeros(1, np.int64)
    assert (
        columns_table(columns, NAME, row, row + 1)["counters"].to_pylist()
        == counters_texts(columns).to_list()
    )


def parts_of(fmt: str):  # noqa: ANN201 - a list of parts
    """One chunk's results as a part in `fmt`, its puzzles in three runs of indices (so it can be cut)."""
    results = solve_many(LINES[:12])
    columns = ResultColumns.build(results.texts, results)
    index = np.array([0, 1, 2, 3, 10, 11, 12, 13, 40, 41, 42, 43], np.int64)
    lines = index * 2 + 5
    return build_part("f" * 16, 0, 0, 12, NAME, index, lines, columns, fmt), columns, index, lines


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_a_part_rendered_in_any_format_reads_as_the_table_of_its_columns(fmt):
    columns_part, columns, index, lines = parts_of("columns")
    rendered = build_part("f" * 16, 0, 0, 12, NAME, index, lines, columns, fmt)
    decoded = type(rendered).decode(rendered.encode())  # as a broker's collector reads it
    whole = records_table(columns, NAME, index, lines)
    assert part_table(decoded, 0, 12).equals(whole)
    assert part_table(columns_part, 0, 12).equals(whole)
    for start, stop in [(0, 4), (4, 8), (8, 12), (4, 12)]:  # the cuts `in_order` makes: at index runs
        assert part_table(decoded, start, stop).equals(whole.slice(start, stop - start))
    assert slices_table([(decoded, 8, 12), (decoded, 0, 8)]).num_rows == 12
    assert slices_table([]).equals(schema().empty_table())


def test_a_csv_part_read_as_a_table_leaves_no_bytes_for_an_arrow_thread_to_release():
    """pyarrow's threaded CSV reader may drop its input on a pool thread after it returned: Python memory
    released there takes the GIL, which a script exiting meanwhile never gives (SIGABRT at exit)."""
    part, *_ = parts_of("csv")
    body = bytes(part.body_rows(0, 12)) * 25  # 300 rows
    before = sys.getrefcount(body)
    held = 0
    for _ in range(500):  # before the fix 1 read in 10 to 100 returned with a reader thread still holding it
        csv_table(body)
        held += sys.getrefcount(body) > before
    assert held == 0


def test_a_part_of_another_format_is_refused_in_one_line():
    part, *_ = parts_of("jsonl")
    part.header.format = "xml"
    with pytest.raises(
        ValueError, match=r"^part 0:0 of job f{16} is rendered as xml: it cannot be read"
    ) as err:
        part_table(part, 0, 12)
    assert "\n" not in str(err.value)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["in-process", "local processes"])
def test_an_embedded_job_reads_as_its_parquet_output_in_every_format_again_later(where, tmp_path):
    lines = LINES if where == "in-process" else [*SAMPLE.read_text().split()[:200], *ODD, *PUZZLES]
    source = tmp_path / NAME
    source.write_text("\n".join(lines) + "\n")
    assert (source.stat().st_size > INLINE_BYTES) == (where == "local processes")
    tables = {}
    with BatchClient(workers=2) as client:
        for fmt in FORMATS:
            job = client.submit(str(source), format=fmt, seed=5, time_limit=5)
            table = tables[fmt] = job.to_arrow()
            assert table.schema.equals(schema()) and table.num_rows == len(lines)
            assert table.column("index").to_pylist() == list(range(len(lines)))
            assert client.job(job.id).to_arrow().equals(table)  # read again (result_ttl)
            if fmt in ("columns", "parquet"):  # the formats a Parquet file is written from
                written = parquet_output(client.job(job.id), tmp_path / f"{fmt}.parquet")
                assert written.schema.equals(table.schema) and written.equals(table)
                frame = client.job(job.id).to_pandas()
                pd.testing.assert_frame_equal(frame, pd.read_parquet(tmp_path / f"{fmt}.parquet"))
                assert client.job(job.id).to_polars().equals(pl.read_parquet(tmp_path / f"{fmt}.parquet"))
            if fmt in ("columns", "jsonl"):  # the formats `Job.results()` reads
                assert table_records(table) == records(client.job(job.id))
    same = tables["columns"].drop_columns(VARYING)
    assert all(t.drop_columns(VARYING).equals(same) for t in tables.values())  # same seed, same answers
    assert tables["columns"].column("status").to_pylist().count("invalid") == 2


def test_keep_false_reads_the_job_once_and_unordered_reads_every_record():
    with BatchClient(workers=1) as client:
        job = client.submit(LINES, name=NAME, time_limit=5)
        table = job.to_arrow(ordered=False, keep=False)
        assert sorted(table.column("index").to_pylist()) == list(range(len(LINES)))
        parts, _ = client.store.arrivals(job.id, 0)
        assert parts and not any(client.store.stored(job.id, parts))  # each part dropped once read


def test_job_results_of_a_columns_job_are_read_from_its_columns_with_no_json_text(monkeypatch):
    with BatchClient(workers=1) as client:
        job = client.submit(LINES, name=NAME, time_limit=5)
        expected = table_records(job.to_arrow())
        rendered = property(lambda part: pytest.fail("a part held as columns was rendered to be parsed back"))
        monkeypatch.setattr(Part, "records", rendered)
        assert records(client.job(job.id)) == expected


@pytest.mark.parametrize(
    ("method", "module", "message"),
    [
        ("to_arrow", "pyarrow", "Job.to_arrow() needs pyarrow: pip install 'sudoku-batch[parquet]'"),
        ("to_pandas", "pandas", "Job.to_pandas() needs pandas: pip install 'sudoku-batch[dataframe]'"),
        ("to_pandas", "pyarrow", "Job.to_pandas() needs pyarrow: pip install 'sudoku-batch[dataframe]'"),
        ("to_polars", "polars", "Job.to_polars() needs polars: pip install 'sudoku-batch[polars]'"),
    ],
)
def test_a_missing_extra_is_one_line_naming_it_and_drops_no_result(method, module, message, monkeypatch):
    with BatchClient(workers=1) as client:
        job = client.submit(LINES[:20], time_limit=5)
        with monkeypatch.context() as patch:
            patch.setitem(sys.modules, module, None)  # `import module` now fails as if not installed
            with pytest.raises(ImportError) as err:
                getattr(job, method)(keep=False)
            assert str(err.value) == message
            with pytest.raises(ImportError) as err:
                getattr(solve_many(LINES[:2]), method)()
            assert str(err.value) == message.replace("Job.", "Results.")
        assert len(list(job.results())) == 20  # nothing was read (keep=False would have dropped it)


def test_a_generate_job_has_no_table_and_says_so_in_one_line():
    with BatchClient(workers=1) as client:
        client.store.create("a" * 16, {"kind": "generate", "state": "produced"})
        with pytest.raises(
            ValueError, match=r"^Job.to_arrow\(\): job a{16} generates puzzles; read them with"
        ):
            client.job("a" * 16).to_arrow()


@pytest.mark.parametrize("method", ["to_arrow", "to_pandas", "to_polars", "results"])
def test_a_dataset_jobs_records_are_refused_in_one_line_naming_its_directory(method, tmp_path):
    with BatchClient(workers=1) as client:
        job = client.submit(LINES[:20], time_limit=5, dataset=str(tmp_path / "out") + "/", format="parquet")
        with pytest.raises(
            ValueError, match=rf"job {job.id} writes a dataset to {tmp_path}/out/: read it there"
        ):
            list(getattr(job, method)())


def test_a_dataset_job_submitted_from_python_is_committed_by_job_commit_and_reads_as_one_table(tmp_path):
    out = tmp_path / "out"
    with BatchClient(workers=1) as client:
        job = client.submit(LINES, time_limit=5, dataset=f"{out}/", format="parquet")
        manifest = job.commit()
        with pytest.raises(ValueError, match=r"^Job.commit\(\): job \w+ writes no dataset"):
            client.submit(LINES[:2], time_limit=5).commit()
    assert (out / "_SUCCESS").exists() and manifest.records == len(LINES)
    table = pq.read_table(out).sort_by("index")
    assert table.column("index").to_pylist() == list(range(len(LINES)))
    assert table.column("status").to_pylist().count("invalid") == len(ODD)


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_a_broker_job_reads_as_its_parquet_output_from_collect_in_every_format_again_later(workers, tmp_path):
    from client.cli import main

    tables, ids = {}, []
    try:
        with BatchClient(workers) as client:
            for fmt in FORMATS:
                job = client.submit(LINES, name=NAME, format=fmt, seed=5, time_limit=5)
                ids.append(job.id)
                table = tables[fmt] = job.to_arrow()
                assert table.schema.equals(schema()) and table.num_rows == len(LINES)
        for fmt, job_id in zip(FORMATS, ids, strict=True):
            with BatchClient(workers) as later:  # another client, as a notebook reading it later would be
                again = later.job(job_id).to_arrow()
                assert again.equals(tables[fmt])
                if fmt in ("columns", "jsonl"):
                    assert table_records(again) == records(later.job(job_id))
            if fmt in ("columns", "parquet"):
                out = tmp_path / f"{fmt}.parquet"
                assert main(["collect", job_id, "--broker", workers, "-o", str(out), "--ordered", "-q"]) == 0
                written = pq.read_table(out)
                assert written.schema.equals(tables[fmt].schema) and written.equals(tables[fmt])
                pd.testing.assert_frame_equal(tables[fmt].to_pandas(), pd.read_parquet(out))
        same = tables["columns"].drop_columns(VARYING)
        assert all(t.drop_columns(VARYING).equals(same) for t in tables.values())
    finally:
        with BatchClient(workers) as client:
            for job_id in ids:
                client.job(job_id).purge()


@pytest.mark.slow
def test_the_dataframe_example_runs_as_written(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / "dataframe.py"), str(SAMPLE)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "306 puzzles" in proc.stdout and "solved" in proc.stdout


@pytest.mark.slow
def test_the_readme_python_api_block_runs_as_written_its_frames_included(tmp_path, monkeypatch):
    """The README's Python API block, run with `lines` and `text` given and a corpus.txt at hand."""
    readme = (REPO / "README.md").read_text()
    block = readme.split("## Python API", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert "job.to_pandas()" in block and "results.to_pandas()" in block
    (tmp_path / "corpus.txt").write_text("\n".join(LINES) + "\n")
    monkeypatch.chdir(tmp_path)
    scope = {"lines": LINES, "text": PUZZLES[0]}
    exec(compile(block, "README.md", "exec"), scope)  # noqa: S102 - the README's own example
    assert len(scope["frame"]) == len(LINES) and list(scope["frame"].columns) == schema().names
    assert scope["frame"]["status"].tolist() == [r.status.value for r in scope["results"]]
