"""End to end on a real redis-server with two real `sudoku-batch worker` processes.

`solve --broker`, `submit` + `collect`, and embedded `solve` must all return every line,
verified, in input order with `--ordered`, with the same statuses.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
import redis

from tests.conftest import CORPORA, SAMPLE, check_records, corpus_file, job_keys_now, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
LINES = SAMPLE.read_text().splitlines()
# a 9x9 puzzle with no solution, from the tdoku test set
NO_SOLUTION = "1...5.2.9..7.......6.......2...........5.1..2....2.39.3.4.9...15...1...3...8...4."


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """9x9 sample puzzles, unsolvable ones, 16x16 grids and invalid lines, in one file."""
    extra = []
    for name, count in (("9x9/tdoku_test_puzzles.txt", 43), ("16x16/gecode_janko_16x16.txt", 3)):
        path = CORPORA / name
        if path.exists():
            extra += path.read_text().splitlines()[:count]
    puzzles = LINES[:200] + ["garbage line"] + extra + [NO_SOLUTION, "1" * 81] + LINES[200:]
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(puzzles) + "\n")
    return path, puzzles


def records_of(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_broker_and_embedded_solve_return_every_line_verified_in_order_with_the_same_statuses(
    workers, corpus, tmp_path
):
    path, puzzles = corpus
    broker_out, local_out = tmp_path / "broker.jsonl", tmp_path / "local.jsonl"
    before = job_keys_now(workers)
    proc = run_cli(
        "solve", str(path), "--broker", workers, "--ordered", "-o", str(broker_out), "--time-limit", "5"
    )
    assert proc.returncode == 0, proc.stderr
    proc = run_cli(
        "solve", str(path), "--ordered", "-o", str(local_out), "--time-limit", "5", "--workers", "2"
    )
    assert proc.returncode == 0, proc.stderr
    broker, local = records_of(broker_out), records_of(local_out)
    check_records(broker, puzzles)
    check_records(local, puzzles)
    assert [r["status"] for r in broker] == [r["status"] for r in local]
    assert {"solved", "invalid", "unsolvable"} <= {r["status"] for r in broker}
    assert job_keys_now(workers) - before == set()  # a finished solve cleans up


def test_submit_returns_a_job_id_and_collect_can_run_twice_with_the_same_output(workers, corpus, tmp_path):
    path, puzzles = corpus
    proc = run_cli("submit", str(path), "--broker", workers)
    assert proc.returncode == 0, proc.stderr
    job = proc.stdout.strip()
    assert len(job) == 32
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert run_cli("collect", job, "--broker", workers, "-o", str(first), "-q").returncode == 0
    assert run_cli("collect", job, "--broker", workers, "-o", str(second), "-q", "--ordered").returncode == 0
    a, b = records_of(first), records_of(second)
    assert sorted(a, key=lambda r: r["index"]) == b
    check_records(b, puzzles)
    status = run_cli("status", job, "--broker", workers, "--json")
    data = json.loads(status.stdout)
    assert data["state"] == "produced" and data["done"] == data["total"] == len(puzzles)
    assert data["counts"]["invalid"] == 2 and len(data["workers"]) >= 2
    assert run_cli("purge", job, "--broker", workers).returncode == 0
    assert run_cli("status", job, "--broker", workers).returncode == 1


@pytest.fixture(scope="module")
def kaggle_csv(tmp_path_factory):
    """Kaggle's sudoku.csv as it is shipped (`quizzes,solutions`, then each puzzle and its solution, 0 for an
    empty cell), 1,000 lines: the shared corpora's Kaggle puzzles and their solutions (else generated)."""
    kaggle = CORPORA / "9x9" / "kaggle_bryanpark_first20000.txt"
    if kaggle.exists():
        solved = kaggle.with_name("kaggle_bryanpark_first20000.solutions.txt")
        quizzes = [q.replace(".", "0") for q in kaggle.read_text().splitlines()[:1000]]
        solutions = solved.read_text().splitlines()[:1000]
    else:
        from solvers.generate.generator import generate_chunk
        from solvers.model.puzzle import Box

        made = generate_chunk(Box(3, 3), 1000, 31, unique=True)
        quizzes = ["".join(map(str, g.puzzle.tolist())) for g in made]
        solutions = ["".join(map(str, g.solution.tolist())) for g in made]
    path = tmp_path_factory.mktemp("kaggle") / "sudoku.csv"
    path.write_text(
        "quizzes,solutions\n" + "".join(f"{q},{a}\n" for q, a in zip(quizzes, solutions, strict=True))
    )
    return path, quizzes, solutions


def check_kaggle(records: list[dict], quizzes: list[str], solutions: list[str]) -> None:
    """Every puzzle of the quizzes column solved, at its line of the file, its solution the one beside it."""
    got = [(r["line"], r["index"], r["puzzle"], r["status"], r["solution"]) for r in records]
    assert got == [
        (k + 2, k, q, "solved", a) for k, (q, a) in enumerate(zip(quizzes, solutions, strict=True))
    ]


def test_kaggles_sudoku_csv_is_solved_from_its_quizzes_column_embedded_and_through_the_workers(
    workers, kaggle_csv, tmp_path
):
    path, quizzes, solutions = kaggle_csv
    for where in ([], ["--broker", workers]):  # the producer reads it here, or the client's for the workers
        out = tmp_path / "out.jsonl"
        run = run_cli("solve", str(path), *where, "--ordered", "-o", str(out))
        assert run.returncode == 0 and "solved 1,000;" in run.stderr and "invalid" not in run.stderr, (
            run.stderr
        )
        check_kaggle(records_of(out), quizzes, solutions)


def test_kaggles_sudoku_csv_read_by_the_workers_in_splits_gives_every_puzzle_of_its_column_solved(
    workers, kaggle_csv, tmp_path
):
    path, quizzes, solutions = kaggle_csv
    out = tmp_path / "out"
    env = {"SUDOKU_BATCH_MAX_SPLIT_BYTES": str(164 * 60)}  # 60 lines a split: most never see the header
    run = run_cli("solve", str(path), "--broker", workers, "-o", f"{out}/", env=env)
    assert run.returncode == 0 and "solved 1,000;" in run.stderr, run.stderr
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["options"]["splits"] and len(manifest["parts"]) > 10
    records = [json.loads(x) for p in sorted(out.glob("part-*")) for x in p.read_text().splitlines()]
    check_kaggle(sorted(records, key=lambda r: r["index"]), quizzes, solutions)


def test_worker_processes_killed_mid_chunk_lose_nothing_and_duplicate_nothing(workers, tmp_path):
    # A consistent 9x9 puzzle with no solution (tdoku's test set): annealing alone cannot
    # prove that, so every puzzle runs to its time limit and each chunk takes ~1.2 s.
    no_solution = "1...5.2.9..7.......6.......2...........5.1..2....2.39.3.4.9...15...1...3...8...4."
    puzzles = [no_solution] * 16
    path = tmp_path / "slow.txt"
    path.write_text("\n".join(puzzles) + "\n")
    env = {"SUDOKU_BATCH_MAX_CHUNK_BYTES": str(82 * 4)}  # 4 puzzles per chunk
    args = ("--broker", workers, "--portfolio", "annealing", "--time-limit", "0.3")
    job = run_cli("submit", str(path), *args, env=env).stdout.strip()
    client = redis.Redis.from_url(workers)
    attempts = f"sbatch:job:{job}:attempts"
    victim = None  # (worker process name "host:pid", chunk) of a chunk being solved right now
    deadline = time.monotonic() + 30
    while victim is None and time.monotonic() < deadline:
        for name, value in client.hgetall("sbatch:current").items():
            owner, _, chunk = value.decode().rpartition(":")
            if owner == job:
                victim = (name.decode(), chunk)
                break
        else:
            time.sleep(0.01)
    assert victim is not None, "no worker started a chunk of the job"
    os.kill(int(victim[0].rsplit(":", 1)[1]), signal.SIGKILL)  # the pool process solving it
    out = tmp_path / "out.jsonl"
    proc = run_cli("collect", job, "--broker", workers, "-o", str(out), "--ordered", "-q")
    assert proc.returncode == 0, proc.stderr
    records = records_of(out)
    check_records(records, puzzles)
    assert {r["status"] for r in records} == {"approximate"} and all(r["cost"] > 0 for r in records)
    assert int(client.hget(attempts, victim[1])) >= 2  # the killed chunk really was redelivered
    run_cli("purge", job, "--broker", workers)


FRISCH = CORPORA / "25x25" / "gecode_frisch_25x25.txt"


def test_a_worker_killed_between_the_parts_of_a_chunk_leaves_one_record_per_line(workers, tmp_path):
    corpus_file("25x25/gecode_frisch_25x25.txt")  # a grid the first pass leaves to the race
    # one chunk: 10 easy puzzles, a frisch 25x25 grid the first pass leaves to the race (~10 s), 10 easy
    easy = SAMPLE.read_text().splitlines()
    puzzles = easy[:10] + FRISCH.read_text().splitlines()[:1] + easy[10:20]
    path = tmp_path / "mixed.txt"
    path.write_text("\n".join(puzzles) + "\n")
    args = ("--broker", workers, "--portfolio", "race", "--time-limit", "30", "--escalate-after", "0")
    job = run_cli("submit", str(path), *args).stdout.strip()
    client = redis.Redis.from_url(workers)
    parts = f"sbatch:job:{job}:parts:0"
    deadline = time.monotonic() + 60
    while client.hlen(parts) < 2:  # the first pass is published: rows 0-9 and 11-20
        assert time.monotonic() < deadline, "the first pass was not published"
        time.sleep(0.01)
    owner = next(n for n, v in client.hgetall("sbatch:current").items() if v.decode() == f"{job}:0")
    os.kill(int(owner.decode().rsplit(":", 1)[1]), signal.SIGKILL)  # racing row 10: between parts
    out = tmp_path / "out.jsonl"
    proc = run_cli("collect", job, "--broker", workers, "-o", str(out), "--ordered", "-q", timeout=180)
    assert proc.returncode == 0, proc.stderr
    check_records(records_of(out), puzzles)
    assert int(client.hget(f"sbatch:job:{job}:attempts", 0)) >= 2  # redelivered
    rows = {k.decode(): int(v) for k, v in client.hgetall(parts).items() if k != b"done"}
    assert rows == {"0": 10, "11": 10, "10": 1}  # the redelivery solved the one row left, nothing twice
    run_cli("purge", job, "--broker", workers)


def test_health_checks_the_broker_and_this_hosts_workers(workers):
    assert run_cli("health", "--broker", workers).returncode == 0
    assert run_cli("health", "--broker", workers, "--broker-only").returncode == 0
    assert run_cli("health", "--broker", "redis://127.0.0.1:1/0").returncode == 1
