"""Dataset output (`-o DIR/`) and input splits: workers read byte ranges of the input and write part files.

Unit tests hold the split reader to the producer's reader wherever the cuts fall, the frontier to
the sums of the counts before each split, the part files to one per line range, and the commit to
what the manifest lists. Integration tests run real workers: a job read in splits, one written
through a killed worker and a killed client then resumed, a merge into one file, and S3 (a real
S3-compatible server, `moto_server`, through s3fs).
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from client.dataset import (
    DatasetOutput,
    DirectoryClaimed,
    check_directory,
    claim_directory,
    claim_lives,
    is_dataset,
)
from client.summary import Summary
from pipeline.contract.keys import Frontier, JobKeys
from pipeline.contract.runs import runs_array
from pipeline.contract.tasks import ChunkTask, Dataset, InputRange
from pipeline.engine.dataset import TEMP_DIR, Claim, part_name, read_claim
from pipeline.engine.lines import ROW_IN_SPLIT
from pipeline.engine.reader import read_blocks
from pipeline.engine.runner import ListPort, run_chunk
from pipeline.engine.splits import SplitRead, read_split
from pipeline.engine.storage import FsspecStorage, LocalStorage, StorageError
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
    wait_until,
)

JOB = "ab" * 8
PUZZLES = [ln for ln in SAMPLE.read_text().splitlines() if len(ln) == 81]
KAGGLE = CORPORA / "9x9" / "kaggle_bryanpark_first20000.txt"


def split_task(
    path: Path, start: int, end: int, chunk: int = 0, stamp: str | None = None, **fields: object
) -> ChunkTask:
    size = path.stat().st_size
    split = InputRange(url=str(path), start=start, end=end, size=size, stamp=stamp)
    return ChunkTask(
        job=JOB, chunk=chunk, input=str(path), index_runs=[], line_runs=[], puzzles="", split=split, **fields
    )  # type: ignore[arg-type]


def entries_by_splits(path: Path, cuts: list[int]) -> list[tuple[int, str, str | None]]:
    """(line, text, error) of every entry the splits at `cuts` read, numbered by the counts before each."""
    bounds = [0, *cuts, path.stat().st_size]
    return entries_of(
        [read_split(split_task(path, a, b, k)) for k, (a, b) in enumerate(itertools.pairwise(bounds))]
    )


def entries_of(reads: list[SplitRead]) -> list[tuple[int, str, str | None]]:
    """(line, text, error) of every entry of consecutive splits read, numbered by the counts before each."""
    out, first_line = [], 1
    for read in reads:
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
            PUZZLES[0] + "\r" + PUZZLES[1],  # CR-only line ends: one line
            "\x00" + "." * 80,
            "é" * 81,
            "." * 256,  # a 16x16 grid among 9x9 ones
            "x" * 5000,
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


def sixteen(seed: int) -> str:
    """A 16x16 puzzle on one line (256 cells)."""
    from solvers.model.puzzle import ALPHABET, Box
    from tests.grids import blank, pattern_grid

    return "".join("." if v == 0 else ALPHABET[v - 1] for v in blank(pattern_grid(Box(4, 4)), 0.5, seed))


def odd_input(kind: str) -> bytes:
    """A small input of one odd kind: what a split may cut anywhere."""
    p = PUZZLES
    comments = ["", "# a comment run", "#", "   ", "# " + "x" * 120, ""]
    return {
        "crlf-bom-comments-no-final-newline": b"\xef\xbb\xbf"
        + "\r\n".join([*comments, p[0], *comments, *comments, p[1], p[2], *comments]).encode(),
        "cr-only": "\r".join(p[:6]).encode() + b"\r",
        "nul-and-bad-utf8": b"\n".join(
            [
                p[0].encode(),
                b"\x00" + p[1][1:].encode(),
                b"\xff\xfe" + b"." * 79,
                "é".encode() * 81,
                p[2].encode(),
            ]
        ),
        "mixed-9x9-16x16": "\n".join([p[0], sixteen(1), p[1], sixteen(2), sixteen(3), p[2]]).encode() + b"\n",
        "a-line-of-5000-characters": "\n".join([p[0], "x" * 5000, p[1], "# end"]).encode(),
    }[kind]


@pytest.mark.parametrize(
    "kind",
    [
        "crlf-bom-comments-no-final-newline",
        "cr-only",
        "nul-and-bad-utf8",
        "mixed-9x9-16x16",
        "a-line-of-5000-characters",
    ],
)
def test_splits_of_every_size_read_each_line_of_an_odd_input_once_as_the_unsplit_reader_does(tmp_path, kind):
    path = tmp_path / "in.txt"
    path.write_bytes(odd_input(kind))
    size = path.stat().st_size
    want = [
        (ln, t, e)
        for b in read_blocks(str(path))
        for ln, t, e in zip(b.lines, b.texts, b.errors, strict=True)
    ]
    data = path.read_bytes()
    lines = data.count(b"\n") + (not data.endswith(b"\n"))
    steps = (
        range(1, size + 1) if size < 2000 else [*range(1, 200), *range(200, size + 1, 97), 4999, 5000, 5001]
    )
    empty = 0
    for step in steps:
        reads = [
            read_split(split_task(path, a, min(a + step, size), k))
            for k, a in enumerate(range(0, size, step))
        ]
        assert entries_of(reads) == want, step
        assert sum(r.lines for r in reads) == lines, step
        empty += sum(not r.entries for r in reads)
    assert empty  # splits that own no puzzle line were read: they hold nothing, each line is read once


def test_splits_cutting_lines_of_one_to_three_megabytes_read_them_once_as_the_unsplit_reader_does(tmp_path):
    path = tmp_path / "in.txt"
    wide = "é€" * 350_000  # 1.75 MB of two- and three-byte characters: a read may end inside one
    path.write_bytes("\n".join([PUZZLES[0], wide, PUZZLES[1], "x" * 3_000_000, "# end", PUZZLES[2]]).encode())
    want = [
        (ln, t, e)
        for b in read_blocks(str(path))
        for ln, t, e in zip(b.lines, b.texts, b.errors, strict=True)
    ]
    assert [e is None for _, _, e in want] == [True, False, True, False, True]
    wide_at, long_at, size = 82, 82 + 1_750_001 + 82, path.stat().st_size  # where the long lines start
    for cuts in (
        [41],
        [83],
        [1000],
        [1001],
        [wide_at + 1_000_000],
        [wide_at + 1_000_001],
        [long_at + 1],
        [long_at + 2_999_999],
        [long_at - 1, long_at + (1 << 20)],
        list(range(97, size, 1 << 20)),
        list(range(1000, size, 333_333)),
    ):
        assert entries_by_splits(path, cuts) == want, cuts


def test_a_split_owning_no_puzzle_line_completes_its_chunk_with_no_record_and_no_file(
    fake_redis, tmp_path, monkeypatch
):
    from pipeline.contract.outbox import outbox_entry
    from pipeline.contract.part import Part
    from pipeline.contract.tasks import VERSION, ChunkRef
    from pipeline.engine.roots import DataRoots
    from worker.config import settings
    from worker.tasks import handle

    roots = DataRoots.parse([str(tmp_path)])  # this process reads and writes as a worker rooted there
    monkeypatch.setitem(settings.__dict__, "roots", roots)

    path = tmp_path / "in.txt"
    path.write_text(PUZZLES[0] + "\n" + "# a comment run\n" * 20 + PUZZLES[1] + "\n")
    out = tmp_path / "out"
    claim_directory(str(out), Claim(job=JOB, host="test", pid=os.getpid()), lambda held: True)
    keys = JobKeys(JOB)
    fake_redis.hset(keys.meta, "created", "1")
    bounds = [(0, 100), (100, 300), (300, path.stat().st_size)]  # the middle split: comments only
    for k, (a, b) in enumerate(bounds):
        task = split_task(path, a, b, k, dataset=Dataset(url=str(out), format="jsonl"))
        fake_redis.hset(keys.outbox, k, outbox_entry(time.time(), task.model_dump_json()))
    assert handle(ChunkRef(v=VERSION, job=JOB, chunk=1).model_dump(), fake_redis) == 0
    assert fake_redis.hget(keys.parts(1), "done") == b"1" and not fake_redis.hexists(keys.outbox, 1)
    assert fake_redis.hget(keys.meta, "chunks_done") == b"1" and fake_redis.lrange(keys.arrivals, 0, -1) == [
        b"1:0"
    ]
    assert (
        handle(ChunkRef(v=VERSION, job=JOB, chunk=1).model_dump(), fake_redis) == 0
    )  # delivered again: nothing to do
    assert handle(ChunkRef(v=VERSION, job=JOB, chunk=2).model_dump(), fake_redis) == 1
    assert handle(ChunkRef(v=VERSION, job=JOB, chunk=0).model_dump(), fake_redis) == 1
    assert not list(out.glob("part-000001-*"))  # no file for no record
    summary = Summary()
    dataset = DatasetOutput(str(out), "jsonl", JOB, {"inputs": str(path), "created": "1"}, summary)
    for name in fake_redis.lrange(keys.arrivals, 0, -1):
        chunk, row = (int(x) for x in name.split(b":"))
        part = Part.decode(fake_redis.get(keys.part(chunk, row)))
        summary.add(part.header.stats, part.header.input)
        dataset.write(part, 0, len(part))
    manifest = dataset.commit()
    assert [(p.chunk, p.first_line, p.first_index) for p in manifest.parts] == [(0, 1, 0), (2, 22, 1)]
    assert [(r["line"], r["status"]) for r in read_back(out, "jsonl")] == [(1, "solved"), (22, "solved")]


@settings(max_examples=40, deadline=None)
@given(lines=LINES, crlf=st.booleans(), seed=st.integers(0, 10**6))
def test_a_csv_input_read_in_splits_gives_each_line_its_puzzle_field_once_wherever_the_cuts_fall(
    tmp_path_factory, lines, crlf, seed
):
    """A split after the first never sees the header: the task carries the column the producer found."""
    from pipeline.engine.inputs import csv_field

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
            update={"split": InputRange(url=str(path), start=a, end=b, size=size, column=column)}
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
    from worker.board import RedisPort

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
    from worker.board import RedisPort, advance_frontier

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


def test_a_worker_that_read_the_frontier_before_another_moved_it_still_moves_it_over_its_own_split(
    fake_redis, monkeypatch
):
    """A reads split 0 only and moves the frontier to 1 while B, whose split 1 is counted, holds the frontier
    A's move made stale: B reads again (a frontier left before a counted split waits for ever)."""
    from worker.board import RedisPort, advance_frontier

    keys = JobKeys(JOB)
    fake_redis.hset(keys.meta, "created", "1")
    fake_redis.hset(keys.counts, 0, "0 3 3")
    advance, parse = Frontier.advance, Frontier.parse.__func__
    gates = {name: (threading.Event(), threading.Event()) for name in "AB"}

    def hold(name: str) -> None:
        paused, resume = gates[name]
        if threading.current_thread().name == name and not paused.is_set():
            paused.set()
            resume.wait(5)

    def read_then_hold(self, counts):  # noqa: ANN001, ANN202 - A has read the counts (split 0 only)
        hold("A")
        return advance(self, counts)

    def parse_then_hold(cls, raw):  # noqa: ANN001, ANN202 - B has read the frontier, not yet the counts
        front = parse(cls, raw)
        hold("B")
        return front

    monkeypatch.setattr(Frontier, "advance", read_then_hold)
    monkeypatch.setattr(Frontier, "parse", classmethod(parse_then_hold))
    a = threading.Thread(target=advance_frontier, args=(fake_redis, keys, 60), name="A")
    a.start()
    assert gates["A"][0].wait(5)
    fake_redis.hset(keys.counts, 1, "0 4 4")  # B counts split 1, then moves the frontier
    b = threading.Thread(target=advance_frontier, args=(fake_redis, keys, 60), name="B")
    b.start()
    assert gates["B"][0].wait(5)
    gates["A"][1].set()
    a.join(5)
    gates["B"][1].set()
    b.join(5)
    assert [RedisPort(fake_redis).split_offsets(JOB, k) for k in range(2)] == [(1, 0), (4, 3)]


def test_a_client_whose_job_has_every_split_done_sums_the_counts_a_frontier_left_behind(fake_redis):
    from client.config import ClientSettings
    from client.redis_store import RedisJobStore

    keys = JobKeys(JOB)
    fake_redis.hset(keys.meta, mapping={"created": "1", "chunks_total": "3", "chunks_done": "2"})
    fake_redis.set(keys.frontier, Frontier(1, 0, 4, 3).text())  # split 0 (3 entries) passed
    fake_redis.hset(keys.counts, mapping={1: "0 4 4", 2: "0 2 0"})
    store = RedisJobStore(fake_redis, ClientSettings())
    assert store.split_total(JOB) is None  # a split is still running: its worker moves the frontier
    fake_redis.hset(keys.meta, "chunks_done", "3")
    assert store.split_total(JOB) == 7
    fake_redis.hdel(keys.counts, 2)  # counted, then passed by a frontier move this read missed
    assert store.split_total(JOB) is None


class RefusingPort(ListPort):
    """A port that refuses every part (its rows were answered by another delivery)."""

    def publish(self, part):  # noqa: ANN001, ANN201
        return False


def dataset_task(root: Path, texts: list[str], job: str = JOB, fmt: str = "jsonl") -> ChunkTask:
    return ChunkTask(
        job=job,
        chunk=3,
        input="in.txt",
        index_runs=[(100, len(texts))],
        line_runs=[(101, len(texts))],
        puzzles="\n".join(texts),
        format="columns",
        dataset=Dataset(url=str(root), format=fmt),  # type: ignore[arg-type]
    )


def claim(root: Path, job: str = JOB, lives: bool = True) -> None:
    """Make `job` the owner of the dataset directory `root`, as its client does (an earlier owner `lives`)."""
    claim_directory(str(root), Claim(job=job, host="test", pid=os.getpid()), lambda held: lives)


def test_a_part_accepted_is_renamed_into_place_and_one_refused_leaves_no_file(tmp_path):
    claim(tmp_path)
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
    assert os.listdir(tmp_path / TEMP_DIR) == []


def test_a_process_that_cannot_see_the_clients_directory_fails_the_job_in_one_line_naming_itself(tmp_path):
    failed: list[str] = []

    class Port(ListPort):
        def fail_job(self, job: str, reason: str) -> None:
            failed.append(reason)

    task = dataset_task(tmp_path, PUZZLES[:3], "cd" * 8)  # no claim: another directory under the same name
    assert run_chunk(Port(), task) == 0
    (reason,) = failed
    assert reason.startswith("worker ") and "cannot see the dataset" in reason and "\n" not in reason
    assert not list(tmp_path.glob("part-*"))


def test_the_commit_renames_parts_whose_worker_died_first_and_deletes_what_is_not_the_dataset(tmp_path):
    claim(tmp_path)
    port = ListPort()
    run_chunk(port, dataset_task(tmp_path, PUZZLES[:4]))
    (part,) = port.parts
    file = part.header.stats.file
    assert file is not None
    os.replace(tmp_path / file.name, tmp_path / file.temp)  # its worker died between publishing and renaming
    (tmp_path / "part-000009-000000.jsonl").write_text("{}\n")  # a refused delivery's
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


OTHER = "cd" * 8


class FailingPort(ListPort):
    """A port that records why its job failed (a worker's `fail_job` writes it to Redis)."""

    def __init__(self) -> None:
        super().__init__()
        self.failed: list[str] = []

    def fail_job(self, job: str, reason: str) -> None:
        self.failed.append(reason)


def test_a_second_job_naming_a_directory_whose_job_lives_is_refused_in_one_line_naming_that_job(tmp_path):
    claim(tmp_path)
    (tmp_path / "part-000000-000000.jsonl").write_text("{}\n")
    with pytest.raises(DirectoryClaimed, match=f"belongs to job {JOB}") as refused:
        claim(tmp_path, OTHER, lives=True)
    assert "\n" not in str(refused.value) and f"purge {JOB}" not in str(refused.value)  # no broker: no purge
    held = read_claim(LocalStorage(), str(tmp_path))
    assert held is not None and held.job == JOB
    assert (tmp_path / "part-000000-000000.jsonl").exists()  # nothing of the first job was touched


def test_a_directory_whose_job_is_gone_is_taken_over_by_exactly_one_of_two_jobs_and_cleared(tmp_path):
    claim(tmp_path)
    for name in (
        "part-000000-000000.jsonl",
        "_SUCCESS",
        "_manifest.json",
        f"{TEMP_DIR}/part-000001-000000.x",
    ):
        (tmp_path / name).write_text("{}\n")
    barrier, won, refused = threading.Barrier(2), [], []

    def take(job: str) -> None:
        barrier.wait()
        try:  # the first job is gone; the other taker lives
            claim_directory(str(tmp_path), Claim(job=job, pid=os.getpid()), lambda held: held.job != JOB)
            won.append(job)
        except DirectoryClaimed as exc:
            refused.append(str(exc))

    threads = [threading.Thread(target=take, args=(job,)) for job in (OTHER, "ef" * 8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(won) == 1 and len(refused) == 1, (won, refused)
    held = read_claim(LocalStorage(), str(tmp_path))
    assert held is not None and (held.job, held.generation) == (won[0], 1)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("_CLAIM")) == [TEMP_DIR]
    assert os.listdir(tmp_path / TEMP_DIR) == []


def _claim_racing(url: str, job: str, barrier: threading.Barrier, outcomes: list[str]) -> None:
    """Claim `url` for `job` once both racers reach `barrier`; append the outcome: won, refused, the error."""
    barrier.wait()
    try:
        claim_directory(url, Claim(job=job, pid=os.getpid(), host="h" * 200), lambda held: True)
        outcomes.append("won")
    except DirectoryClaimed:
        outcomes.append("refused")
    except StorageError as exc:
        outcomes.append(str(exc))


def test_of_two_jobs_claiming_a_new_directory_at_once_one_wins_and_the_other_reads_a_whole_claim(tmp_path):
    """The loser reads the winner's claim at once: it must never find it empty or half written."""
    for round_ in range(150):
        url, barrier, outcomes = str(tmp_path / f"d{round_}"), threading.Barrier(2), []
        threads = [
            threading.Thread(target=_claim_racing, args=(url, job, barrier, outcomes))
            for job in (OTHER, "ef" * 8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(outcomes) == ["refused", "won"], (round_, outcomes)
        assert not [n for n in os.listdir(url) if n.startswith("_tmp.")]


def test_whether_a_claims_job_lives_is_told_by_its_broker_or_by_its_process_on_this_host():
    gone = subprocess.Popen(["true"])
    gone.wait()
    here, broker = socket.gethostname(), "127.0.0.1:6379/0"
    on_ours = Claim(job=JOB, broker=broker)
    assert claim_lives(on_ours, {"created": "1", "state": "producing"}, broker)
    assert claim_lives(on_ours, {"created": "1", "state": "produced"}, broker)  # submitted, not collected yet
    assert not claim_lives(on_ours, {"created": "1", "state": "failed"}, broker)
    assert not claim_lives(on_ours, {}, broker)  # purged or expired from our broker
    assert claim_lives(Claim(job=JOB, broker="10.0.0.9:6379/0"), {}, broker)  # another broker's: unknown
    assert not claim_lives(Claim(job=JOB, host=here, pid=gone.pid), {}, "")
    assert claim_lives(Claim(job=JOB, host=here, pid=os.getpid()), {}, "")
    assert claim_lives(Claim(job=JOB, host="elsewhere", pid=gone.pid), {}, "")


def test_a_chunk_of_a_job_whose_directory_was_taken_over_fails_the_job_in_one_line_and_writes_nothing(
    tmp_path,
):
    claim(tmp_path)
    assert run_chunk(ListPort(), dataset_task(tmp_path, PUZZLES[:3])) == 3  # checked by this process
    claim(tmp_path, OTHER, lives=False)  # the first job failed; another took the directory over
    port = FailingPort()
    assert run_chunk(port, dataset_task(tmp_path, PUZZLES[:3])) == 0
    (reason,) = port.failed
    assert reason.startswith("worker ") and f"taken over by job {OTHER}" in reason and "\n" not in reason
    assert not list(tmp_path.glob("part-*")) and os.listdir(tmp_path / TEMP_DIR) == []


def test_a_commit_of_a_job_whose_directory_was_taken_over_deletes_nothing_and_says_so(tmp_path):
    claim(tmp_path)
    port = ListPort()
    run_chunk(port, dataset_task(tmp_path, PUZZLES[:4]))
    (part,) = port.parts
    claim(tmp_path, OTHER, lives=False)
    (tmp_path / "part-000001-000000.jsonl").write_text("{}\n")  # the new owner's
    out = DatasetOutput(str(tmp_path), "jsonl", JOB, {"inputs": "in.txt", "created": "1"}, Summary())
    out.write(part, 0, len(part))
    with pytest.raises(StorageError, match=f"taken over by job {OTHER}"):
        out.commit()
    assert (tmp_path / "part-000001-000000.jsonl").exists() and not (tmp_path / "_SUCCESS").exists()


def test_a_commit_releases_the_directory_and_a_collection_run_again_leaves_the_dataset_as_it_is(tmp_path):
    claim(tmp_path)
    port = ListPort()
    run_chunk(port, dataset_task(tmp_path, PUZZLES[:4]))
    (part,) = port.parts
    out = DatasetOutput(str(tmp_path), "jsonl", JOB, {"inputs": "in.txt", "created": "1"}, Summary())
    out.write(part, 0, len(part))
    first = out.commit()
    assert read_claim(LocalStorage(), str(tmp_path)) is None
    assert out.commit() == first
    claim(tmp_path, OTHER)  # free: the next job has it at once
    assert sorted(os.listdir(tmp_path)) == ["_CLAIM", TEMP_DIR]


def test_a_full_disk_under_a_chunk_fails_the_job_in_one_line_naming_the_worker_the_path_and_the_reason(
    tmp_path, monkeypatch
):
    job = "ef" * 8
    claim(tmp_path, job)
    assert run_chunk(ListPort(), dataset_task(tmp_path, PUZZLES[:3], job)) == 3  # checked: the disk had room

    def full(self, path, data):  # noqa: ANN001, ANN202 - what a write to a full disk raises
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(LocalStorage, "put", full)
    port = FailingPort()
    assert run_chunk(port, dataset_task(tmp_path, PUZZLES[:3], job)) == 0
    (reason,) = port.failed
    assert reason.startswith("worker ") and str(tmp_path) in reason and "No space left on device" in reason
    assert "\n" not in reason and not port.parts


def test_a_chunk_whose_error_answer_did_not_get_through_either_fails_the_job_without_its_storage(tmp_path):
    port = FailingPort()  # the dataset's directory does not even exist: the storage is not touched
    assert run_chunk(port, dataset_task(tmp_path / "gone", PUZZLES[:3]), max_attempts=3, attempts=5) == 0
    (reason,) = port.failed
    assert "started 4 times without an answer" in reason and "\n" not in reason and not port.parts


class BackendError(Exception):
    """What a storage backend raises that is no OSError (botocore's, aiohttp's)."""


def test_every_error_of_an_fsspec_backend_is_an_oserror_naming_the_path():
    from fsspec.implementations.memory import MemoryFileSystem

    class Broken(MemoryFileSystem):
        def info(self, path, **kwargs):  # noqa: ANN001, ANN003, ANN201
            raise BackendError("Could not connect to the endpoint URL")

        def pipe_file(self, path, value, mode="overwrite", **kwargs):  # noqa: ANN001, ANN003, ANN201
            raise BackendError("Could not connect to the endpoint URL")

    store = FsspecStorage(Broken())
    for call in (lambda: store.stat("memory://b/in.txt"), lambda: store.put("memory://b/x", b"1")):
        with pytest.raises(StorageError, match="memory://b/.*BackendError: Could not connect"):
            call()
    with pytest.raises(StorageError, match="BackendError"):
        store.create("memory://b/x", b"1")
    assert FsspecStorage(MemoryFileSystem()).listdir("memory://nowhere") == []  # not found: as it was


def test_a_store_without_conditional_writes_still_creates_a_claim_once():
    from fsspec.implementations.memory import MemoryFileSystem

    class Plain(MemoryFileSystem):  # an S3-compatible store answering 501 to If-None-Match
        def pipe_file(self, path, value, mode="overwrite", **kwargs):  # noqa: ANN001, ANN003, ANN201
            if mode == "create":
                raise OSError(errno.ENOSYS, "NotImplemented: If-None-Match")
            return super().pipe_file(path, value, **kwargs)

    store = FsspecStorage(Plain())
    assert store.create("memory://plain/_CLAIM", b"first") and not store.create("memory://plain/_CLAIM", b"2")
    assert store.read("memory://plain/_CLAIM") == b"first"


def test_a_split_of_an_input_rewritten_at_the_same_size_is_refused_without_its_size(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text(PUZZLES[0] + "\n" + PUZZLES[1] + "\n")
    stat = LocalStorage().stat(str(path))
    task = split_task(path, 0, stat.size, stamp=stat.stamp)
    assert read_split(task).entries == 2
    path.write_text(PUZZLES[1] + "\n" + PUZZLES[0] + "\n")  # the same size, other lines
    os.utime(path, ns=(stat_ns(path), stat_ns(path) + 1_000_000_000))  # a second later, whatever the clock
    with pytest.raises(StorageError, match="changed since the job was submitted") as changed:
        read_split(task)
    assert str(stat.size) not in str(changed.value)
    old = split_task(path, 0, stat.size)  # an older client's split: no stamp, the size alone is checked
    assert read_split(old).entries == 2


def stat_ns(path: Path) -> int:
    return path.stat().st_mtime_ns


def read_back(root: Path, fmt: str) -> list[dict]:
    """Every record of a committed dataset, read as one table by pandas and by pyarrow.dataset."""
    import pandas as pd
    import pyarrow.dataset as ds

    from pipeline.engine.render.parquet import schema

    assert (root / "_SUCCESS").exists()
    files = sorted(str(p) for p in root.glob("part-*"))
    if fmt == "parquet":
        frame = pd.read_parquet(root)
        table = ds.dataset(str(root), format="parquet").to_table()
    elif fmt == "csv":
        frame = pd.concat([pd.read_csv(f, dtype={"puzzle": str, "solution": str}) for f in files])
        table = ds.dataset(files, format="csv", schema=schema()).to_table()
    else:
        from solvers.model.frame import jsonl_options

        frame = pd.concat(
            [pd.read_json(f, lines=True, dtype={"puzzle": str, "solution": str}) for f in files]
        )
        options = jsonl_options()  # counters, an object per record, left out
        flat = options.explicit_schema
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
        dataset.copy_dataset(str(out), merged, "parquet")
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


def split_and_whole(workers: str, path: Path, tmp_path: Path, split_bytes: int | None) -> tuple[list, list]:
    """(index, line, status, error) of every record of `path` solved by workers reading it in splits of
    `split_bytes` (None: the default size) into a dataset, and solved whole by the embedded pipeline."""
    env = {"SUDOKU_BATCH_MAX_SPLIT_BYTES": str(split_bytes)} if split_bytes else {}
    out = tmp_path / "out"
    run = run_cli("solve", str(path), "--broker", workers, "-o", f"{out}/", "-q", env=env)
    assert run.returncode == 0, run.stderr
    manifest = json.loads((out / "_manifest.json").read_text())
    chunks = {part["chunk"] for part in manifest["parts"]}
    assert manifest["options"]["splits"] and len(chunks) < max(chunks) + 1  # splits that own no line: no part
    whole = tmp_path / "whole.jsonl"
    embedded = run_cli("solve", str(path), "-o", str(whole), "-q")
    assert embedded.returncode == 0, embedded.stderr
    fields = ("index", "line", "status", "error")
    split = [tuple(r[f] for f in fields) for r in read_back(out, "jsonl")]
    one = [tuple(r[f] for f in fields) for r in map(json.loads, whole.read_text().splitlines())]
    return split, sorted(one)


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_300_puzzles_among_comment_runs_in_97_byte_splits_give_300_records_and_exit_0(workers, tmp_path):
    path = tmp_path / "in.txt"
    rng = random.Random(7)
    lines: list[str] = []
    for puzzle in corpus_lines(300):
        lines.append(puzzle)
        if rng.random() < 0.5:  # most splits of 97 bytes own no puzzle line
            lines += ["# a comment " + "x" * rng.randint(0, 150) for _ in range(rng.randint(1, 4))]
            lines += [""] * rng.randint(0, 3)
    path.write_text("\n".join(lines) + "\n")
    split, whole = split_and_whole(workers, path, tmp_path, 97)
    assert len(split) == 300 and split == whole
    assert [line for _, line, _, _ in split] == [k + 1 for k, t in enumerate(lines) if t and t[0] != "#"]


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_an_odd_input_read_in_97_byte_splits_gives_every_line_the_record_it_gets_read_whole(
    workers, tmp_path
):
    path = tmp_path / "in.txt"
    path.write_bytes(
        b"\r\n".join(odd_input(kind) for kind in ("crlf-bom-comments-no-final-newline", "nul-and-bad-utf8"))
        + b"\n"
        + odd_input("mixed-9x9-16x16")
        + odd_input("a-line-of-5000-characters")
        + b"\n"
        + odd_input("cr-only")[:200]  # a line holding carriage returns, no final newline
    )
    split, whole = split_and_whole(workers, path, tmp_path, 97)
    assert split == whole
    assert {s for _, _, s, _ in split} == {"solved", "invalid"} and sum(
        s == "invalid" for _, _, s, _ in split
    ) == 5


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_a_three_megabyte_line_read_in_splits_of_the_default_size_is_one_invalid_record(workers, tmp_path):
    path = tmp_path / "in.txt"
    puzzles = corpus_lines(4000)
    path.write_text("\n".join([*puzzles[:2000], "7" * 3_000_000, *puzzles[2000:]]) + "\n")
    split, whole = split_and_whole(workers, path, tmp_path, None)
    assert split == whole and len(split) == 4001
    assert split[2000][1:3] == (2001, "invalid") and split[2000][3].startswith("3,000,000 characters")


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
        # 12,000 lines: the two kills and the first 20 parts take a few seconds; the job must not end
        # before them on a quiet machine (with 6,000 it ended first 1 run in about 30)
        puzzles = corpus_lines(12000)
        path.write_text("\n".join(puzzles) + "\n")
        out = tmp_path / "out"
        env = {"SUDOKU_BATCH_MAX_SPLIT_BYTES": str(82 * 40), "SUDOKU_BATCH_CHUNK_SECONDS": "0.05"}
        solve = subprocess.Popen(
            [
                *cli_command(),
                "solve",
                str(path),
                "--broker",
                server.url,
                "-o",
                f"{out}/",
                "-q",
                "--format",
                "parquet",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
        )
        deadline = time.monotonic() + 60
        killed = 0
        while killed < 2:  # kill a pool process while it solves a chunk, twice
            running = {k.decode(): v.decode() for k, v in client.hgetall("sbatch:current").items()}
            pools = [p for w in procs for p in children(w.pid)]
            busy = [int(k.rsplit(":", 1)[1]) for k in running if int(k.rsplit(":", 1)[1]) in pools]
            if busy:
                os.kill(busy[0], signal.SIGKILL)
                killed += 1
                pid = busy[0]  # gone from its worker's pool before the next look for a busy one
                wait_until(
                    lambda pid=pid: pid not in [p for w in procs for p in children(w.pid)],
                    30,
                    "reaped pool process",
                )
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


def submitted(workers: str, path: Path, out: Path) -> str:
    """The job of a dataset `submit` of `path` to `out/` (small splits), which must succeed."""
    submit = run_cli("submit", str(path), "--broker", workers, "-o", f"{out}/", env=SMALL_SPLITS)
    assert submit.returncode == 0, submit.stderr
    return submit.stdout.strip()


def wait_for_a_part(out: Path) -> None:
    """Until the workers wrote a first part into the dataset `out` (60 s at most)."""
    deadline = time.monotonic() + 60
    while not list(out.glob("part-*")):
        assert time.monotonic() < deadline
        time.sleep(0.01)


def one_line(stderr: str) -> str:
    """The one line a command failed with (its stderr holds nothing else)."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_a_second_job_naming_a_directory_the_first_job_owns_is_refused_and_the_first_dataset_stays_exact(
    workers, tmp_path
):
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    a, b = corpus_lines(3000), corpus_lines(3300)[3000:]
    first.write_text("\n".join(a) + "\n")
    second.write_text("\n".join(b) + "\n")
    out = tmp_path / "out"
    job = submitted(workers, first, out)
    try:
        refused = run_cli("solve", str(second), "--broker", workers, "-o", f"{out}/", "-q")
        assert refused.returncode != 0
        line = one_line(refused.stderr)
        assert f"belongs to job {job}" in line and f"purge {job}" in line, line
        collect = run_cli("collect", job, "--broker", workers, "-o", f"{out}/", "-q")
        assert collect.returncode == 0, collect.stderr
        check_dataset(out, a)  # every line of the first job's input once, nothing of the second's
    finally:
        assert run_cli("purge", job, "--broker", workers).returncode == 0
    gone = submitted(workers, first, out)  # committed: the directory was free again
    assert run_cli("purge", gone, "--broker", workers).returncode == 0
    taken = run_cli("solve", str(second), "--broker", workers, "-o", f"{out}/", "-q")
    assert taken.returncode == 0, taken.stderr  # its owner purged: taken over, its parts cleared
    check_dataset(out, b)
    redis.Redis.from_url(workers).delete(f"sbatch:job:{job}:stop", f"sbatch:job:{gone}:stop")


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_a_job_whose_dataset_directory_vanished_fails_in_one_line_instead_of_resending_for_ever(
    workers, tmp_path
):
    path = tmp_path / "in.txt"
    path.write_text("\n".join(corpus_lines(12000)) + "\n")
    out = tmp_path / "out"
    job = submitted(workers, path, out)
    try:
        wait_for_a_part(out)  # the workers are writing it: delete it under them
        out.rename(tmp_path / "moved")  # gone at once, as a `rm -r` racing the workers' writes is not
        began = time.monotonic()
        collect = run_cli("collect", job, "--broker", workers, "-o", f"{out}/", "-q", timeout=90)
        assert collect.returncode == 1 and time.monotonic() - began < 60, collect.stderr
        line = one_line(collect.stderr)
        assert "cannot see the dataset" in line and str(out) in line, line
    finally:
        assert run_cli("purge", job, "--broker", workers).returncode == 0
        redis.Redis.from_url(workers).delete(f"sbatch:job:{job}:stop")


@pytest.fixture
def small_disk(tmp_path: Path):  # noqa: ANN201 - yields the mount point
    """A 256 KB tmpfs (root can mount one; elsewhere the test is skipped, saying why)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (it needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_a_full_disk_ends_the_job_within_a_minute_in_one_line_naming_the_worker_the_path_and_the_reason(
    workers, small_disk, tmp_path
):
    path = tmp_path / "in.txt"
    path.write_text("\n".join(corpus_lines(4000)) + "\n")  # ~1.5 MB of records for 256 KB
    out = small_disk / "out"
    began = time.monotonic()
    run = run_cli("solve", str(path), "--broker", workers, "-o", f"{out}/", "-q", timeout=90)
    assert run.returncode == 1 and time.monotonic() - began < 60, run.stderr
    line = one_line(run.stderr)
    assert "worker " in line and str(out) in line and "No space left on device" in line, line
    assert not (out / "_SUCCESS").exists()
    job = line.split("job ", 1)[1].split(":", 1)[0]
    assert run_cli("purge", job, "--broker", workers).returncode == 0  # the session's Redis as it was


@pytest.mark.timeout(240)
def test_a_full_disk_under_local_processes_ends_the_command_in_one_line_without_a_traceback(
    small_disk, tmp_path
):
    path = tmp_path / "in.txt"
    path.write_text("\n".join(corpus_lines(80000)) + "\n")  # chunks still queued when the first fails
    out = small_disk / "out"
    run = run_cli("solve", str(path), "-o", f"{out}/", "-q", timeout=90)
    assert run.returncode == 1
    line = one_line(run.stderr)
    assert "No space left on device" in line and str(out) in line, line


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_an_input_rewritten_at_the_same_size_mid_job_fails_the_job_in_one_line_not_mixing_versions(
    workers, tmp_path
):
    path = tmp_path / "in.txt"
    puzzles = corpus_lines(6000)
    path.write_text("\n".join(puzzles) + "\n")
    out = tmp_path / "out"
    job = submitted(workers, path, out)
    try:
        wait_for_a_part(out)  # the first splits are read: rewrite the rest under the workers
        before = path.stat()
        path.write_text("\n".join(reversed(puzzles)) + "\n")
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))  # whatever the clock
        assert path.stat().st_size == before.st_size
        collect = run_cli("collect", job, "--broker", workers, "-o", f"{out}/", "-q", timeout=90)
        assert collect.returncode == 1, collect.stderr
        line = one_line(collect.stderr)
        assert "worker " in line and f"the input {path} changed since the job was submitted" in line, line
        assert str(before.st_size) not in line and not (out / "_SUCCESS").exists()
    finally:
        assert run_cli("purge", job, "--broker", workers).returncode == 0
        redis.Redis.from_url(workers).delete(f"sbatch:job:{job}:stop")


def _cannot(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the S3 test must run under CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture
def s3(tmp_path: Path):  # noqa: ANN201 - yields (environment, s3fs filesystem)
    """A real S3-compatible server (`moto_server`, the moto[server] package's) on a free port, with a bucket;
    yields the environment that points fsspec (s3fs) at it, and a filesystem of this process."""
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
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "FSSPEC_S3_ENDPOINT_URL": endpoint,
    }
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
    roots = {"SUDOKU_BATCH_DATA_ROOTS": "s3://jobs"}  # the bucket: the input and the dataset are in it
    procs = start_workers(server.url, 2, tmp_path_factory.mktemp("s3-workers"), env={**env, **roots})
    try:
        run = run_cli(
            "solve",
            "s3://jobs/in.txt",
            "--broker",
            server.url,
            "-o",
            "s3://jobs/out/",
            "--format",
            "parquet",
            "-q",
            env={**env, "SUDOKU_BATCH_MAX_SPLIT_BYTES": str(82 * 200)},
        )
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


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_an_s3_endpoint_the_workers_cannot_reach_ends_the_job_within_a_minute_in_one_line(
    s3, tmp_path_factory
):
    env, fs = s3
    fs.pipe("jobs/in.txt", ("\n".join(corpus_lines(600)) + "\n").encode())
    server = RedisServer(tmp_path_factory.mktemp("s3-down-redis"), appendonly=False)
    server.start()
    closed = {
        **env,
        "FSSPEC_S3_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",
        "SUDOKU_BATCH_DATA_ROOTS": "s3://jobs",
    }  # nothing listens there
    procs = start_workers(server.url, 1, tmp_path_factory.mktemp("s3-down-workers"), env=closed)
    try:
        began = time.monotonic()
        run = run_cli(
            "solve",
            "s3://jobs/in.txt",
            "--broker",
            server.url,
            "-o",
            "s3://jobs/out/",
            "-q",
            env=env,
            timeout=90,
        )
        elapsed = time.monotonic() - began
    finally:
        stop_all(procs)
        server.stop()
    assert run.returncode == 1 and elapsed < 60, run.stderr
    line = one_line(run.stderr)
    assert "worker " in line and "s3://jobs/" in line and "EndpointConnectionError" in line, line


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_dataset_in_a_bucket_that_does_not_exist_is_refused_in_one_line_naming_it_and_never_created(
    s3, tmp_path
):
    env, fs = s3
    path = tmp_path / "in.txt"
    path.write_text("\n".join(PUZZLES[:20]) + "\n")
    run = run_cli("solve", str(path), "-o", "s3://nobucket/out/", "-q", env=env)
    assert run.returncode == 1, run.stderr
    line = one_line(run.stderr)
    assert "the bucket nobucket does not exist" in line, line
    fs.invalidate_cache()
    assert "nobucket" not in [b.rstrip("/") for b in fs.ls("")]


def test_a_dataset_whose_commit_fails_after_every_record_was_written_exits_1_in_one_line(
    tmp_path, monkeypatch, capsys
):
    """Every record written, then the commit (`_manifest.json`, `_SUCCESS`) fails: the command says so
    and exits 1 (it exited 0 with the error printed: a dataset never committed looked done)."""
    from client.cli import main
    from client.dataset import DatasetOutput
    from pipeline.engine.storage import StorageError

    def full_disk(self):  # noqa: ANN001, ANN202
        raise StorageError(f"cannot write {self.path}/_manifest.json: OSError: [Errno 28] No space left")

    monkeypatch.setattr(DatasetOutput, "commit", full_disk)
    monkeypatch.delenv("SUDOKU_BATCH_BROKER", raising=False)
    path = tmp_path / "three.txt"
    path.write_text("\n".join(SAMPLE.read_text().splitlines()[:3]) + "\n")
    capsys.readouterr()
    code = main(["solve", str(path), "-o", f"{tmp_path / 'out'}/", "-q"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.count("\n") == 1 and "No space left" in err, err
