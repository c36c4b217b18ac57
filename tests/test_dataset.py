"""Dataset output (`-o DIR/`) and input splits: workers read byte ranges of the input and write part files.

Unit tests hold the split reader to the producer's reader wherever the cuts fall, the frontier to
the sums of the counts before each split, the part files to one per line range, and the commit to
what the manifest lists. Integration tests run real workers: a job read in splits, one written
through a killed worker and a killed client then resumed, a merge into one file, and S3 (a real
S3-compatible server, `moto_server`, through s3fs).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from client.dataset import DatasetOutput, check_directory, is_dataset, mark_directory
from client.summary import Summary
from pipeline.dataset import TEMP_DIR, job_marker, part_name
from pipeline.keys import Frontier, JobKeys
from pipeline.reader import ROW_IN_SPLIT, read_blocks
from pipeline.runner import ListPort, run_chunk
from pipeline.runs import runs_array
from pipeline.splits import read_split
from pipeline.tasks import ChunkTask, Dataset, Split
from tests.conftest import (
    CORPORA,
    SAMPLE,
    RedisServer,
    check_records,
    children,
    cli_command,
    free_port,
    run_cli,
    start_workers,
    stop_all,
)

JOB = "ab" * 8
PUZZLES = [ln for ln in SAMPLE.read_text().splitlines() if len(ln) == 81]
KAGGLE = CORPORA / "9x9" / "kaggle_bryanpark_first20000.txt"


def split_task(path: Path, start: int, end: int, chunk: int = 0, **fields: object) -> ChunkTask:
    size = path.stat().st_size
    split = Split(url=str(path), start=start, end=end, size=size)
    return ChunkTask(
        job=JOB, chunk=chunk, input=str(path), index_runs=[], line_runs=[], puzzles="", split=split, **fields
    )  # type: ignore[arg-type]


def entries_by_splits(path: Path, cuts: list[int]) -> list[tuple[int, str, str | None]]:
    """(line, text, error) of every entry the splits at `cuts` read, numbered by the counts before each."""
    bounds = [0, *cuts, path.stat().st_size]
    out, first_line = [], 1
    for k, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        read = read_split(split_task(path, a, b, k))
        errors = [None] * read.valid + read.reasons
        index, lines = runs_array(read.task.index_runs), runs_array(read.task.line_runs)
        rows = zip(index, lines, read.task.texts(), errors, strict=True)
        out += [(int(line) + first_line - 1, text, error) for _, line, text, error in sorted(rows)]
        first_line += read.lines
    return out


LINES = st.lists(
    st.sampled_from(
        [
            *PUZZLES[:20],
            "",
            "   ",
            "# a comment",
            "12345",
            "not a puzzle",
            "." * 81 + "\r",
            "\ufeffx",
            "1" * 81,
        ]
    ),
    min_size=0,
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(lines=LINES, bom=st.booleans(), end=st.booleans(), seed=st.integers(0, 10**6))
def test_every_line_is_read_once_by_the_split_it_starts_in_wherever_the_cuts_fall(
    tmp_path_factory, lines, bom, end, seed
):
    path = tmp_path_factory.mktemp("splits") / "in.txt"
    text = ("\ufeff" if bom else "") + "\n".join(lines) + ("\n" if end and lines else "")
    path.write_bytes(text.encode())
    size = path.stat().st_size
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, size), min(size - 1, rng.randint(0, 8)))) if size > 1 else []
    want = [
        (ln, t, e)
        for b in read_blocks(str(path))
        for ln, t, e in zip(b.lines, b.texts, b.errors, strict=True)
    ]
    assert entries_by_splits(path, cuts) == want


@settings(max_examples=40, deadline=None)
@given(lines=LINES, crlf=st.booleans(), seed=st.integers(0, 10**6))
def test_a_csv_input_read_in_splits_gives_each_line_its_puzzle_field_once_wherever_the_cuts_fall(
    tmp_path_factory, lines, crlf, seed
):
    """A split after the first never sees the header: the task carries the column the producer found."""
    from pipeline.reader import csv_field

    path = tmp_path_factory.mktemp("csv-splits") / "in.csv"
    rows = [
        ln if not ln.strip() or ln.startswith("#") else f"{k},{ln.strip()},x" for k, ln in enumerate(lines)
    ]
    path.write_bytes(("\r\n" if crlf else "\n").join(["id,puzzle,solution", *rows, ""]).encode())
    size = path.stat().st_size
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, size), min(size - 1, rng.randint(0, 8))))
    column = csv_field(path.read_bytes(), None, "in.csv", final=True)
    assert column == 1
    bounds, got, first = [0, *cuts, size], [], 1
    for k, (a, b) in enumerate(itertools.pairwise(bounds)):
        task = split_task(path, a, b, k).model_copy(
            update={"split": Split(url=str(path), start=a, end=b, size=size, column=column)}
        )
        read = read_split(task)
        errors = [None] * read.valid + read.reasons
        index, line = runs_array(read.task.index_runs), runs_array(read.task.line_runs)
        rows = sorted(zip(index, line, read.task.texts(), errors, strict=True))
        got += [(int(n) + first - 1, t, e) for _, n, t, e in rows]
        first += read.lines
    want = [
        (n, t, e) for b in read_blocks(str(path)) for n, t, e in zip(b.lines, b.texts, b.errors, strict=True)
    ]
    assert got == want


def test_a_row_of_a_grid_written_over_several_lines_is_answered_invalid_in_a_split_not_joined(tmp_path):
    path = tmp_path / "rows.txt"
    rows = ["5 3 0 0 7 0 0 0 0", "6 0 0 1 9 5 0 0 0"]
    path.write_text("\n".join([PUZZLES[0], *rows, PUZZLES[1]]) + "\n")
    read = read_split(split_task(path, 0, path.stat().st_size))
    assert read.valid == 2 and read.reasons == [ROW_IN_SPLIT, ROW_IN_SPLIT]
    assert read.task.texts() == [PUZZLES[0], PUZZLES[1], *rows]
    assert runs_array(read.task.line_runs).tolist() == [1, 4, 2, 3]


def test_a_split_of_an_input_that_changed_size_is_refused_naming_it(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text(PUZZLES[0] + "\n")
    task = split_task(path, 0, 10)
    path.write_text(PUZZLES[0] + "\n" + PUZZLES[1] + "\n")
    with pytest.raises(OSError, match="changed"):
        read_split(task)


def test_the_frontier_numbers_each_split_from_the_counts_of_every_split_before_it():
    front = Frontier()
    counts = {0: (0, 10, 9), 1: (0, 5, 5), 2: (1, 7, 6), 3: (1, 2, 1)}  # split -> (input, lines, entries)
    assert front.advance([counts[0], None, counts[2]]) == [(0, 1, 0)]  # split 1 is not counted yet
    assert front.advance([counts[1], counts[2], counts[3], None]) == [(1, 11, 9), (2, 1, 14), (3, 8, 20)]
    assert (front.chunk, front.input, front.line, front.index) == (4, 1, 10, 21)
    assert Frontier.parse(front.text()).text() == front.text()


def test_splits_counted_in_any_order_by_racing_workers_get_the_offsets_of_the_sums_before_them(
    fake_redis, monkeypatch
):
    from worker.tasks import RedisPort

    advance = Frontier.advance

    def slow(self, counts):  # noqa: ANN001, ANN202 - another worker moves the frontier meanwhile
        time.sleep(0.002)
        return advance(self, counts)

    monkeypatch.setattr(Frontier, "advance", slow)
    keys = JobKeys(JOB)
    fake_redis.hset(keys.meta, "created", "1")
    port = RedisPort(fake_redis)
    counts = [(0 if k < 20 else 1, random.randint(0, 9), random.randint(0, 9)) for k in range(40)]
    order = list(range(40))
    random.shuffle(order)
    threads = [threading.Thread(target=port.split_read, args=(JOB, k, *counts[k])) for k in order]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    line, index = 1, 0
    for k, (_, lines, entries) in enumerate(counts):
        if k == 20:
            line = 1
        assert port.split_offsets(JOB, k) == (line, index), k
        line, index = line + lines, index + entries
    assert fake_redis.hlen(keys.counts) == 0  # counts leave once the frontier passed them


def test_a_worker_moving_the_frontier_from_a_stale_read_never_moves_it_back(fake_redis, monkeypatch):
    from worker.tasks import RedisPort, advance_frontier

    keys = JobKeys(JOB)
    fake_redis.hset(keys.meta, "created", "1")
    fake_redis.hset(keys.counts, mapping={0: "0 3 3", 1: "0 4 4"})
    advance, paused, resume = Frontier.advance, threading.Event(), threading.Event()

    def stale(self, counts):  # noqa: ANN001, ANN202 - worker A reads, then waits while B moves the frontier
        if threading.current_thread().name == "A" and not paused.is_set():
            paused.set()
            resume.wait(5)
        return advance(self, counts)

    monkeypatch.setattr(Frontier, "advance", stale)
    a = threading.Thread(target=advance_frontier, args=(fake_redis, keys, 60), name="A")
    a.start()
    assert paused.wait(5)
    port = RedisPort(fake_redis)
    port.split_read(JOB, 2, 0, 5, 5)  # B: split 2 counted, the frontier moved past it
    resume.set()
    a.join(5)
    port.split_read(JOB, 3, 0, 1, 1)
    assert [port.split_offsets(JOB, k) for k in range(4)] == [(1, 0), (4, 3), (8, 7), (13, 12)]


class RefusingPort(ListPort):
    """A port that refuses every part (its rows were answered by another delivery)."""

    def publish(self, part):  # noqa: ANN001, ANN201
        return False


def dataset_task(root: Path, texts: list[str], job: str = JOB, fmt: str = "jsonl") -> ChunkTask:
    return ChunkTask(
        job=job, chunk=3, input="in.txt", index_runs=[(100, len(texts))], line_runs=[(101, len(texts))],
        puzzles="\n".join(texts), format="columns",
        dataset=Dataset(url=str(root), format=fmt),  # type: ignore[arg-type]
    )  # fmt: skip


def test_a_part_accepted_is_renamed_into_place_and_one_refused_leaves_no_file(tmp_path):
    mark_directory(str(tmp_path), JOB)
    task = dataset_task(tmp_path, PUZZLES[:5])
    accepted = ListPort()
    assert run_chunk(accepted, task) == 5
    (part,) = accepted.parts
    assert part.body == b"" and part.header.stats.file is not None
    name = part_name(3, 0, task.dataset)  # type: ignore[arg-type]
    records = [json.loads(x) for x in (tmp_path / name).read_text().splitlines()]
    assert [(r["line"], r["index"]) for r in records] == [(101 + i, 100 + i) for i in range(5)]
    (tmp_path / name).unlink()
    assert run_chunk(RefusingPort(), task) == 0
    assert not (tmp_path / name).exists()
    assert os.listdir(tmp_path / TEMP_DIR) == [job_marker(JOB)]


def test_a_process_that_cannot_see_the_clients_directory_fails_the_job_in_one_line_naming_itself(tmp_path):
    failed: list[str] = []

    class Port(ListPort):
        def fail_job(self, job: str, reason: str) -> None:
            failed.append(reason)

    task = dataset_task(tmp_path, PUZZLES[:3], "cd" * 8)  # no marker: another directory under the same name
    assert run_chunk(Port(), task) == 0
    (reason,) = failed
    assert reason.startswith("worker ") and "cannot see the dataset" in reason and "\n" not in reason
    assert not list(tmp_path.glob("part-*"))


def test_the_commit_renames_parts_whose_worker_died_first_and_deletes_what_is_not_the_dataset(tmp_path):
    mark_directory(str(tmp_path), JOB)
    port = ListPort()
    run_chunk(port, dataset_task(tmp_path, PUZZLES[:4]))
    (part,) = port.parts
    file = part.header.stats.file
    assert file is not None
    os.replace(tmp_path / file.name, tmp_path / file.temp)  # its worker died between publishing and renaming
    (tmp_path / "part-000009-000000.jsonl").write_text("{}\n")  # an earlier run's, or a refused delivery's
    summary = Summary()
    summary.add(part.header.stats, "in.txt")
    out = DatasetOutput(str(tmp_path), "jsonl", JOB, {"inputs": "in.txt", "created": "1"}, summary)
    out.write(part, 0, len(part))
    manifest = out.commit()
    assert sorted(os.listdir(tmp_path)) == ["_SUCCESS", "_manifest.json", file.name]
    assert [p.file for p in manifest.parts] == [file.name] and manifest.records == 4
    assert (manifest.parts[0].first_line, manifest.parts[0].last_line) == (101, 104)


def test_a_dataset_directory_must_be_new_empty_or_a_dataset(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="notes.txt"):
        check_directory(str(tmp_path))
    assert is_dataset(str(tmp_path)) and is_dataset("s3://bucket/out/") and not is_dataset("out.jsonl")


def read_back(root: Path, fmt: str) -> list[dict]:
    """Every record of a committed dataset, read as one table by pandas and by pyarrow.dataset."""
    import pandas as pd
    import pyarrow.dataset as ds

    from pipeline.render.parquet import schema

    assert (root / "_SUCCESS").exists()
    files = sorted(str(p) for p in root.glob("part-*"))
    if fmt == "parquet":
        frame = pd.read_parquet(root)
        table = ds.dataset(str(root), format="parquet").to_table()
    elif fmt == "csv":
        frame = pd.concat([pd.read_csv(f, dtype={"puzzle": str, "solution": str}) for f in files])
        table = ds.dataset(files, format="csv", schema=schema()).to_table()
    else:
        import pyarrow as pa
        import pyarrow.json as pj

        frame = pd.concat(
            [pd.read_json(f, lines=True, dtype={"puzzle": str, "solution": str}) for f in files]
        )
        flat = pa.schema([f for f in schema() if f.name != "counters"])  # counters: an object per record
        options = pj.ParseOptions(explicit_schema=flat, unexpected_field_behavior="ignore")
        table = ds.dataset(files, format=ds.JsonFileFormat(parse_options=options), schema=flat).to_table()
    assert table.num_rows == len(frame)
    assert sorted(table.column("index").to_pylist()) == sorted(frame["index"].tolist())
    frame = frame.sort_values("index")
    return [
        {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
        for row in frame.to_dict("records")
    ]


def check_dataset(root: Path, puzzles: list[str], fmt: str = "jsonl") -> None:
    """One record per puzzle, in index order, each solved one verified; the manifest lists the files."""
    records = read_back(root, fmt)
    for r in records:
        r["puzzle"] = str(r["puzzle"])
        if r["solution"] is not None:
            r["solution"] = str(r["solution"])
    check_records(records, puzzles)
    manifest = json.loads((root / "_manifest.json").read_text())
    assert sorted(p["file"] for p in manifest["parts"]) == sorted(p.name for p in root.glob("part-*"))
    assert manifest["records"] == len(puzzles) == sum(p["records"] for p in manifest["parts"])
    assert not (root / TEMP_DIR).exists()


@pytest.mark.parametrize(("fmt", "compression"), [("jsonl", "none"), ("csv", "gzip"), ("parquet", "zstd")])
def test_an_embedded_solve_writes_a_dataset_pandas_and_pyarrow_read_as_one_table(tmp_path, fmt, compression):
    out = tmp_path / "out"
    run = run_cli("solve", str(SAMPLE), "-o", f"{out}/", "--format", fmt, "--compression", compression, "-q")
    assert run.returncode == 0, run.stderr
    puzzles = [ln for ln in SAMPLE.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    check_dataset(out, puzzles, fmt)
    merged = tmp_path / f"merged.{fmt}"  # `collect DIR/ -o FILE`: one file, whatever ran the job
    run = run_cli("collect", f"{out}/", "-o", str(merged), "-q")
    assert run.returncode == 0, run.stderr
    import pandas as pd

    frame = {"jsonl": lambda p: pd.read_json(p, lines=True), "csv": pd.read_csv, "parquet": pd.read_parquet}[
        fmt
    ](merged)
    assert sorted(frame["index"]) == list(range(len(puzzles)))


def test_merging_a_parquet_dataset_leaves_no_part_bytes_for_an_arrow_thread_to_release(tmp_path, monkeypatch):
    """Bytes an Arrow pool thread releases after the read returned take the GIL there; when the command
    exits meanwhile, Python ends that thread mid-unwind: `collect DIR/ -o x.parquet` died by SIGABRT."""
    import sys

    import client.dataset as dataset
    from client.output import Output

    out = tmp_path / "out"
    assert run_cli("solve", str(SAMPLE), "-o", f"{out}/", "--format", "parquet", "-q").returncode == 0
    read: list[bytes] = []  # every file merge reads: the manifest, then the part
    store = dataset.storage_for(str(out))  # the one merge gets (cached)
    plain = store.read
    monkeypatch.setattr(store, "read", lambda path: read.append(plain(path)) or read[-1])
    for _ in range(300):  # the bytes are free as merge returns (before the fix: not after 1 merge in 50)
        merged = Output(str(tmp_path / "merged.parquet"), "parquet")
        dataset.merge(str(out), merged, "parquet")
        merged.close(keep=True)
        assert [sys.getrefcount(read[k]) for k in range(len(read))] == [2, 2]  # the list's and the call's
        read.clear()


def corpus_lines(n: int) -> list[str]:
    source = KAGGLE if KAGGLE.exists() else SAMPLE
    lines = [ln for ln in source.read_text().splitlines() if len(ln.strip()) == 81]
    return (lines * (n // len(lines) + 1))[:n]


SMALL_SPLITS = {"SUDOKU_BATCH_MAX_SPLIT_BYTES": str(82 * 50)}  # 50 lines a split: many splits, a long job


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_broker_job_read_in_splits_numbers_every_line_of_every_input_as_the_producer_would(
    workers, tmp_path
):
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    a = corpus_lines(900)
    b = corpus_lines(1400)[900:]
    first.write_text("\n".join(a[:300] + ["", "# note", "not a puzzle"] + a[300:]) + "\n")
    second.write_text("\r\n".join(b))  # CRLF, no final newline
    out = tmp_path / "out"
    run = run_cli(
        "solve", str(first), str(second), "--broker", workers, "-o", f"{out}/", "-q", env=SMALL_SPLITS
    )
    assert run.returncode == 0, run.stderr
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["options"]["splits"] and len(manifest["parts"]) > 10
    records = sorted(read_back(out, "jsonl"), key=lambda r: r["index"])
    want = [(str(first), i + 1, t) for i, t in enumerate(a[:300])] + [(str(first), 303, "not a puzzle")]
    want += [(str(first), 304 + i, t) for i, t in enumerate(a[300:])]
    want += [(str(second), i + 1, t) for i, t in enumerate(b)]
    assert [(r["input"], r["line"], str(r["puzzle"])) for r in records] == want
    assert [r["index"] for r in records] == list(range(len(want)))
    assert sum(r["status"] == "invalid" for r in records) == 1


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_submit_to_a_dataset_then_collect_into_one_file_merges_every_part(workers, tmp_path):
    path = tmp_path / "in.txt"
    puzzles = corpus_lines(1200)
    path.write_text("\n".join(puzzles) + "\n")
    out = tmp_path / "out"
    submit = run_cli(
        "submit", str(path), "--broker", workers, "-o", f"{out}/", "--format", "csv", env=SMALL_SPLITS
    )
    assert submit.returncode == 0, submit.stderr
    merged = tmp_path / "merged.csv"
    collect = run_cli("collect", submit.stdout.strip(), "--broker", workers, "-o", str(merged))
    assert collect.returncode == 0, collect.stderr
    parts = len(
        list(out.glob("part-*"))
    )  # collect JOB names the directory the job committed, not only the file
    assert (
        f"dataset {out}/ committed: 1,200 records in {parts} part files, merged into {merged}\n"
        in collect.stderr
    )
    check_dataset(out, puzzles, "csv")
    import pandas as pd

    frame = pd.read_csv(merged, dtype={"puzzle": str})
    assert sorted(frame["index"]) == list(range(len(puzzles))) and len(frame.columns) == 14
    job = submit.stdout.strip()
    assert run_cli("purge", job, "--broker", workers).returncode == 0  # collect keeps a job: the tests after
    redis.Redis.from_url(workers).delete(f"sbatch:job:{job}:stop")  # see the session's redis clean


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_a_dataset_written_through_a_killed_worker_and_a_killed_client_then_resumed_has_each_line_once(
    tmp_path_factory, tmp_path
):
    import redis

    server = RedisServer(tmp_path_factory.mktemp("ds-redis"))
    server.start()
    procs = start_workers(
        server.url, 2, tmp_path_factory.mktemp("ds-workers"), env={"SUDOKU_BATCH_ORPHAN_AFTER_S": "4"}
    )
    client = redis.Redis.from_url(server.url)
    try:
        path = tmp_path / "in.txt"
        puzzles = corpus_lines(6000)
        path.write_text("\n".join(puzzles) + "\n")
        out = tmp_path / "out"
        env = {"SUDOKU_BATCH_MAX_SPLIT_BYTES": str(82 * 40), "SUDOKU_BATCH_CHUNK_SECONDS": "0.05"}
        solve = subprocess.Popen(
            [*cli_command(), "solve", str(path), "--broker", server.url, "-o", f"{out}/", "-q", "--format",
             "parquet"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env},
        )  # fmt: skip
        deadline = time.monotonic() + 60
        killed = 0
        while killed < 2:  # kill a pool process while it solves a chunk, twice
            running = {k.decode(): v.decode() for k, v in client.hgetall("sbatch:current").items()}
            pools = [p for w in procs for p in children(w.pid)]
            busy = [int(k.rsplit(":", 1)[1]) for k in running if int(k.rsplit(":", 1)[1]) in pools]
            if busy:
                os.kill(busy[0], signal.SIGKILL)
                killed += 1
                time.sleep(0.3)
            assert time.monotonic() < deadline and solve.poll() is None, solve.communicate()
            time.sleep(0.01)
        while len(list(out.glob("part-*"))) < 20:  # a good part of the job is written: kill the client
            assert time.monotonic() < deadline and solve.poll() is None, solve.communicate()
            time.sleep(0.01)
        solve.send_signal(signal.SIGKILL)
        solve.wait(10)
        assert not (out / "_SUCCESS").exists()
        job = next(k.decode().split(":")[2] for k in client.scan_iter("sbatch:job:*:meta"))
        assert client.hget(f"sbatch:job:{job}:meta", "state") == b"producing"  # its submission too was cut
        while client.hget(f"sbatch:job:{job}:meta", "state") != b"produced":  # its producer died with it
            resume = run_cli("submit", "--resume", job, str(path), "--broker", server.url, env=env)
            if resume.returncode == 0:
                break
            assert "may still be running" in resume.stderr and time.monotonic() < deadline + 30, resume.stderr
            time.sleep(1)
        collect = run_cli("collect", job, "--broker", server.url, "-o", f"{out}/", "-q", env=env)
        assert collect.returncode == 0, collect.stderr
        check_dataset(out, puzzles, "parquet")
    finally:
        client.close()
        stop_all(procs)
        server.stop()


def _cannot(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the S3 test must run under CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture
def s3(tmp_path: Path):  # noqa: ANN201 - yields (environment, s3fs filesystem)
    """A real S3-compatible server (`moto_server`, the moto[server] package's) on a free port, with a bucket;
    yields the environment that points fsspec (s3fs) at it, and a filesystem of this process."""
    import shutil
    import sys
    import urllib.request

    server = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or shutil.which("moto_server")
    try:
        import s3fs
    except ImportError as exc:
        _cannot(f"s3fs is not installed: {exc}")
    if server is None:
        _cannot("moto_server (pip install 'moto[server]') is not installed")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = open(tmp_path / "moto.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [server, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT
    )
    env = {
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
        "FSSPEC_S3_ENDPOINT_URL": endpoint,
    }  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(endpoint, timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    _cannot(f"moto_server did not start: {(tmp_path / 'moto.log').read_text()[-500:]}")
                time.sleep(0.1)
        fs = s3fs.S3FileSystem(key="testing", secret="testing", endpoint_url=endpoint)
        fs.mkdir("jobs")
        yield env, fs
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_a_job_reads_its_input_from_s3_in_splits_and_writes_its_dataset_there(s3, tmp_path_factory, tmp_path):
    import pyarrow.dataset as ds

    env, fs = s3
    puzzles = corpus_lines(3000)
    fs.pipe("jobs/in.txt", ("\n".join(puzzles) + "\n").encode())
    server = RedisServer(tmp_path_factory.mktemp("s3-redis"), appendonly=False)
    server.start()
    procs = start_workers(server.url, 2, tmp_path_factory.mktemp("s3-workers"), env=env)
    try:
        run = run_cli(
            "solve", "s3://jobs/in.txt", "--broker", server.url, "-o", "s3://jobs/out/", "--format",
            "parquet", "-q", env={**env, "SUDOKU_BATCH_MAX_SPLIT_BYTES": str(82 * 200)},
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
    finally:
        stop_all(procs)
        server.stop()
    fs.invalidate_cache()
    names = sorted(p.rsplit("/", 1)[1] for p in fs.ls("jobs/out"))
    manifest = json.loads(fs.cat("jobs/out/_manifest.json"))
    assert names == sorted(["_SUCCESS", "_manifest.json", *(p["file"] for p in manifest["parts"])])
    assert manifest["options"]["splits"] and len(manifest["parts"]) > 5
    table = ds.dataset("jobs/out/", filesystem=fs, format="parquet").to_table()
    records = sorted(table.to_pylist(), key=lambda r: r["index"])
    check_records(records, puzzles)
    assert [r["line"] for r in records] == list(range(1, len(puzzles) + 1))
