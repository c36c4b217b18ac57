"""Output targets: a FIFO or a symlink is never replaced by a regular file; stale `.part` files go."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading

from client.output import Output
from client.target import Target, remove_stale_parts
from tests.conftest import SAMPLE, cli_command

LINES = SAMPLE.read_text().splitlines()


def _corpus(tmp_path, n: int = 20):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(LINES[:n]) + "\n")
    return path


def test_solve_into_a_fifo_writes_through_it_and_leaves_the_fifo_in_place(tmp_path):
    path = _corpus(tmp_path)
    fifo = tmp_path / "results.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = subprocess.run(
        [*cli_command(), "solve", str(path), "-o", str(fifo), "-q", "--workers", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    reader.join(30)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    records = [json.loads(line) for line in got[0].splitlines()]
    assert sorted(r["index"] for r in records) == list(range(20))


def test_solve_into_a_symlink_writes_its_target_and_keeps_the_link(tmp_path):
    path = _corpus(tmp_path)
    real = tmp_path / "real.jsonl"
    real.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    proc = subprocess.run(
        [*cli_command(), "solve", str(path), "-o", str(link), "-q", "--workers", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert len(real.read_text().splitlines()) == 20
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "link.jsonl", "real.jsonl"]


def test_a_dangling_symlink_gets_its_target_created_and_stays_a_link(tmp_path):
    link = tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "new.jsonl")
    out = Target(link)
    out.stream.write(b"{}\n")
    out.close(keep=True)
    assert link.is_symlink() and (tmp_path / "new.jsonl").read_bytes() == b"{}\n"


def test_an_output_into_a_directory_holding_other_files_is_a_one_line_usage_error(tmp_path):
    path = _corpus(tmp_path, 3)
    proc = subprocess.run(
        [*cli_command(), "solve", str(path), "-o", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "holds 'corpus.txt', which is not part of a dataset" in proc.stderr  # a directory: a dataset


def test_a_part_file_left_by_a_dead_writer_is_removed_by_the_next_one(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f".out.jsonl.{dead.pid}.abc123.part"
    stale.write_text("half a file\n")
    out = Output(str(tmp_path / "out.jsonl"))
    parts = [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")]
    assert stale.name not in parts and len(parts) == 1  # only the new writer's own part
    out.close(keep=False)
    assert list(tmp_path.iterdir()) == []


def test_the_part_file_of_a_writer_still_at_work_is_left_alone(tmp_path):
    first = Target(tmp_path / "out.jsonl")
    first.stream.write(b"partial\n")
    second = Target(tmp_path / "out.jsonl")  # same process: alive, and its part is locked
    assert len([p for p in tmp_path.iterdir() if p.name.endswith(".part")]) == 2
    assert remove_stale_parts(str(tmp_path), "out.jsonl") == 0
    second.close(keep=True)
    first.close(keep=False)
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_a_fifo_nobody_reads_is_waited_for_aloud_then_written_when_a_reader_comes(tmp_path):
    import time

    path = _corpus(tmp_path)
    fifo = tmp_path / "results.fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [*cli_command(), "solve", str(path), "-o", str(fifo), "-q", "--workers", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    timer = threading.Timer(60, proc.kill)  # a silent wait must fail the test, not hang it
    timer.start()
    try:
        started = time.monotonic()
        line = proc.stderr.readline()
        waited = time.monotonic() - started
        assert line == f"waiting for a reader of {fifo} (a FIFO): nothing is written until one opens it\n"
        assert 2.0 < waited < 30
        records = [json.loads(r) for r in fifo.read_bytes().splitlines()]
        assert proc.wait(60) == 0, proc.stderr.read()
    finally:
        timer.cancel()
        proc.kill()
    assert sorted(r["index"] for r in records) == list(range(20))
