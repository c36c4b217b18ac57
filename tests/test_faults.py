"""Faults: Redis restarted mid-job, a collector or a submit killed and re-run, a solver raising, chunk limits.

The integration tests run their own redis-server (AOF on) and two real workers, so
they can restart Redis without disturbing the session's fixtures.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from pipeline.contract.keys import queue_lists, queued
from pipeline.contract.part import Part
from tests.conftest import (
    CORPORA,
    SAMPLE,
    RedisServer,
    check_records,
    children,
    chunk_task,
    cli_command,
    run_cli,
    start_workers,
    stop_all,
)

KAGGLE = CORPORA / "9x9" / "kaggle_bryanpark_first20000.txt"
HARD = CORPORA / "25x25" / "sudoku_acs_general_25x25.txt"
SMALL_CHUNKS = {"SUDOKU_BATCH_MAX_CHUNK_BYTES": str(82 * 40)}  # 40 puzzles a chunk: many chunks, a long job
FAST_RESEND = {"SUDOKU_BATCH_RESEND_AFTER": "3"}  # a chunk task the broker lost is re-sent within seconds


def start_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start `sudoku-batch` in the background."""
    return subprocess.Popen(
        [*cli_command(), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def records_of(path: Path) -> list[dict]:
    """The JSON Lines records of an output file."""
    return [json.loads(line) for line in path.read_text().splitlines()]


@dataclass
class Stack:
    """A redis-server of this module and the worker processes consuming from it."""

    server: RedisServer
    workers: list[subprocess.Popen[bytes]]

    @property
    def url(self) -> str:
        return self.server.url

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A redis-server with AOF persistence and two real workers on it."""
    server = RedisServer(tmp_path_factory.mktemp("aof-redis"))
    server.start()
    try:
        procs = start_workers(
            server.url, 2, tmp_path_factory.mktemp("fault-workers"), env={"SUDOKU_BATCH_ORPHAN_AFTER_S": "4"}
        )
        try:
            yield Stack(server, procs)
        finally:
            stop_all(procs)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Several thousand 9x9 puzzles and one invalid line (sent in ~100 small chunks)."""
    source = KAGGLE if KAGGLE.exists() else SAMPLE
    lines = [ln for ln in source.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    puzzles = (lines * (4000 // len(lines) + 1))[:4000] + ["not a puzzle"]  # the sample, repeated if need be
    path = tmp_path_factory.mktemp("fault-corpus") / "corpus.txt"
    path.write_text("\n".join(puzzles) + "\n")
    return path, puzzles


def wait_for_arrivals(client: redis.Redis, job: str, count: int, timeout: float = 30) -> int:
    """Wait until `count` chunk results of `job` have arrived; return how many have."""
    deadline = time.monotonic() + timeout
    while (n := client.llen(f"sbatch:job:{job}:arrivals")) < count:
        assert time.monotonic() < deadline, f"only {n} chunks arrived in {timeout} s"
        time.sleep(0.01)
    return n


def parent_pid(pid: int) -> int:
    """The parent of a live process (from /proc)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.fixture(scope="module")
def slow_corpus(
    corpus: tuple[Path, list[str]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[str]]:
    """Hard 25x25 puzzles first when available (slower chunks), then the 9x9 corpus."""
    hard = HARD.read_text().splitlines()[800:812] if HARD.exists() else []
    puzzles = hard + corpus[1][:2000]
    path = tmp_path_factory.mktemp("slow-corpus") / "slow.txt"
    path.write_text("\n".join(puzzles) + "\n")
    return path, puzzles


def solve_slow(
    stack: Stack, slow_corpus: tuple[Path, list[str]], tmp_path: Path, env: dict[str, str]
) -> tuple[subprocess.Popen[str], Path, list[str]]:
    """A running ordered `solve` of the slow corpus on the stack: the process, its output, the puzzles."""
    path, puzzles = slow_corpus
    out = tmp_path / "out.jsonl"
    solve = start_cli(
        "solve",
        str(path),
        "--broker",
        stack.url,
        "-o",
        str(out),
        "--ordered",
        "-q",
        "--time-limit",
        "0.25",
        env=env,
    )
    return solve, out, puzzles


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_redis_restart_mid_chunk_loses_nothing_and_workers_and_client_reconnect(
    stack, slow_corpus, tmp_path
):
    client = stack.client()
    solve, out, puzzles = solve_slow(stack, slow_corpus, tmp_path, {**SMALL_CHUNKS, **FAST_RESEND})
    deadline = time.monotonic() + 60
    while not (running := client.hvals("sbatch:current")):  # a chunk is being solved
        assert time.monotonic() < deadline and solve.poll() is None, solve.communicate()
        time.sleep(0.005)
    stack.server.stop()
    time.sleep(1.5)
    stack.server.start()
    _, err = solve.communicate(timeout=120)
    assert solve.returncode == 0, err
    check_records(records_of(out), puzzles)
    assert running

    # Both workers still consume after the restart (not only their heartbeat threads).
    again = run_cli(
        "submit", str(corpus_path(puzzles[-2000:], tmp_path)), "--broker", stack.url, env=SMALL_CHUNKS
    )
    job2 = again.stdout.strip()
    out2 = tmp_path / "again.jsonl"
    proc = run_cli(
        "collect", job2, "--broker", stack.url, "-o", str(out2), "-q", "--ordered", "--timeout", "30"
    )
    assert proc.returncode == 0, proc.stderr
    check_records(records_of(out2), puzzles[-2000:])
    names = {json.loads(v)["worker"] for v in client.hvals(f"sbatch:job:{job2}:stats")}
    pool_pids = {int(name.rsplit(":", 1)[1]) for name in names if name != "producer"}
    assert {parent_pid(pid) for pid in pool_pids} == {p.pid for p in stack.workers}
    client.close()


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_a_redis_restart_while_a_raced_chunk_runs_loses_no_message_and_the_job_ends_within_90_s(
    stack, corpus, tmp_path
):
    """Issue 31: Redis (AOF) restarted while a chunk raced its slow puzzle on the other worker. The owner's
    run, cut short by Celery on the lost connection, met the dead Redis again removing its `sbatch:current`
    entry; Celery's retry could not be sent and the message was rejected without requeue, and the entry
    stayed, so both resend sweeps took the chunk for running: "solving 0/1" for 6+ minutes. The client's
    resend is off here: the workers alone find the chunk again."""
    from tests.test_escalation import slow_puzzle

    puzzles = [slow_puzzle(), *corpus[1][:20]]
    path = corpus_path(puzzles, tmp_path)
    out = tmp_path / "out.jsonl"
    client = stack.client()
    race = ("--portfolio", "race", "--escalate-after", "0.2", "--time-limit", "60")
    solve = start_cli(
        "solve",
        str(path),
        "--broker",
        stack.url,
        "-o",
        str(out),
        "--ordered",
        "-q",
        *race,
        env={"SUDOKU_BATCH_RESEND_AFTER": "600"},
    )
    try:
        deadline = time.monotonic() + 120
        while not any(v.endswith(b":race") for v in client.hvals("sbatch:current")):  # a helper races it
            assert time.monotonic() < deadline and solve.poll() is None, solve.communicate()
            time.sleep(0.01)
        stack.server.stop()
        time.sleep(1.5)  # Redis away as long as a restart takes
        stack.server.start()
        _, err = solve.communicate(timeout=90)
        assert solve.returncode == 0, err
        check_records(records_of(out), puzzles)
    finally:
        solve.kill()
        solve.wait(10)
        client.close()


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_chunk_tasks_lost_from_the_broker_queue_are_resent_by_the_collector_and_each_puzzle_answered_once(
    stack, corpus, tmp_path
):
    puzzles = corpus[1][:400]
    client = stack.client()
    nobody = {**SMALL_CHUNKS, "SUDOKU_BATCH_QUEUE": "sbatch-test-nobody"}  # no worker consumes this queue
    submitted = run_cli("submit", str(corpus_path(puzzles, tmp_path)), "--broker", stack.url, env=nobody)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    sent = int(client.hget(f"sbatch:job:{job}:meta", "chunks_total"))
    assert queued(client, "sbatch-test-nobody") == sent == client.hlen(f"sbatch:job:{job}:outbox") > 1
    client.delete(*queue_lists("sbatch-test-nobody"))  # every message lost, as when Redis stops mid-BRPOP
    out = tmp_path / "out.jsonl"
    proc = run_cli(
        "collect",
        job,
        "--broker",
        stack.url,
        "-o",
        str(out),
        "-q",
        "--ordered",
        "--timeout",
        "60",
        env={"SUDOKU_BATCH_RESEND_AFTER": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    check_records(records_of(out), puzzles)
    assert int(client.hget(f"sbatch:job:{job}:meta", "resent")) == sent
    assert client.hlen(f"sbatch:job:{job}:outbox") == 0
    client.close()


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_chunk_whose_message_is_gone_while_a_live_process_is_named_solving_it_is_sent_again_by_the_workers(
    stack, corpus, tmp_path
):
    """The state a Redis restart left (issue 31): the chunk's message is nowhere (not queued, not
    unacknowledged), its delivery record is old, and a live pool process is still named solving it. The
    process's beat drops the entry it is not running, and the workers' sweep sends the chunk again from
    the outbox; no collector resends (its sweep is off)."""
    puzzles = corpus[1][:30]
    nobody = {"SUDOKU_BATCH_QUEUE": "sbatch-test-nobody"}  # the job and its outbox; no worker takes it
    submitted = run_cli("submit", str(corpus_path(puzzles, tmp_path)), "--broker", stack.url, env=nobody)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    client = stack.client()
    try:
        client.delete(*queue_lists("sbatch-test-nobody"))  # the message is gone
        live = client.zrangebyscore("sbatch:workers", time.time() - 3, "+inf")
        client.hset("sbatch:current", live[0], f"{job}:0")  # what the process ran when Redis went away
        client.hset("sbatch:deliveries", f"{job}:0", f"{uuid.uuid4()}|{time.time() - 60:.3f}")
        out = tmp_path / "out.jsonl"
        proc = run_cli(
            "collect",
            job,
            "--broker",
            stack.url,
            "-o",
            str(out),
            "-q",
            "--ordered",
            env={"SUDOKU_BATCH_RESEND_AFTER": "600"},
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        check_records(records_of(out), puzzles)
        assert client.hget(f"sbatch:job:{job}:attempts", 0) == b"1" and not client.hlen("sbatch:deliveries")
    finally:
        client.close()


def corpus_path(puzzles: list[str], tmp_path: Path) -> Path:
    """Write puzzles to a file of the test."""
    path = tmp_path / "puzzles.txt"
    path.write_text("\n".join(puzzles) + "\n")
    return path


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_collector_killed_mid_job_can_be_run_again_and_writes_each_puzzle_once(stack, corpus, tmp_path):
    path, puzzles = corpus
    job = run_cli("submit", str(path), "--broker", stack.url, env=SMALL_CHUNKS).stdout.strip()
    out = tmp_path / "out.jsonl"
    client = stack.client()
    collect = start_cli("collect", job, "--broker", stack.url, "-o", str(out), "-q")
    wait_for_arrivals(client, job, 3)
    deadline = time.monotonic() + 30
    while not [p for p in tmp_path.glob(".out.jsonl.*.part") if p.stat().st_size]:  # it writes part of it
        assert time.monotonic() < deadline and collect.poll() is None, collect.communicate()
        time.sleep(0.01)
    assert collect.poll() is None, "the collector finished before it could be killed"
    collect.send_signal(signal.SIGKILL)
    collect.wait(10)
    assert not out.exists()  # a killed collector leaves no half file under the final name
    proc = run_cli("collect", job, "--broker", stack.url, "-o", str(out), "-q", "--timeout", "30")
    assert proc.returncode == 0, proc.stderr
    assert not list(tmp_path.glob(".out.jsonl.*")), "the re-run removes the part the killed one left"
    records = records_of(out)
    assert len(records) == len(puzzles)
    check_records(sorted(records, key=lambda r: r["index"]), puzzles)
    assert run_cli("purge", job, "--broker", stack.url).returncode == 0
    client.close()


def resume_until_taken(
    job: str, path: Path, url: str, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """`submit --resume`, retried while it is refused because the killed producer beat too recently."""
    deadline = time.monotonic() + timeout
    while True:
        proc = run_cli("submit", "--resume", job, str(path), "--broker", url, env=SMALL_CHUNKS)
        if "may still be running" not in proc.stderr or time.monotonic() > deadline:
            return proc
        time.sleep(0.5)


KILLED_AT_SEND = """
import os, signal, sys
from client.transport import CeleryTransport
send, sends = CeleryTransport.send, [0]

def dying_send(self, task):  # the process dies as a crash would: task K committed to the outbox, unsent
    sends[0] += 1
    if sends[0] == int(sys.argv[1]):
        os.kill(os.getpid(), signal.SIGKILL)
    send(self, task)

CeleryTransport.send = dying_send
from client.cli import main
sys.exit(main(sys.argv[2:]))
"""


def run_killed_at_send(k: int, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run `sudoku-batch ARGS` in a process that SIGKILLs itself at its k-th chunk send (a fake transport)."""
    return subprocess.run(
        [sys.executable, "-c", KILLED_AT_SEND, str(k), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_submit_killed_half_way_is_resumed_and_collect_writes_each_puzzle_once(stack, corpus, tmp_path):
    body = corpus[1][:3000]
    puzzles = body[:700] + ["bad line one"] + body[700:1900] + ["1" * 81] + body[1900:]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(puzzles[:1000] + ["# a comment", ""] + puzzles[1000:]) + "\n")
    client = stack.client()
    killed = run_killed_at_send(30, "submit", str(path), "--broker", stack.url, env=SMALL_CHUNKS)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    job = killed.stdout.strip()
    meta = {k.decode(): v.decode() for k, v in client.hgetall(f"sbatch:job:{job}:meta").items()}
    assert meta["state"] == "producing" and 0 < json.loads(meta["checkpoint"])["index"] < len(puzzles)
    out = tmp_path / "out.jsonl"
    collect = start_cli("collect", job, "--broker", stack.url, "-o", str(out), "-q", "--ordered")

    deadline = time.monotonic() + 30
    while "submission incomplete" not in (status := run_cli("status", job, "--broker", stack.url)).stdout:
        assert time.monotonic() < deadline, status.stdout + status.stderr
        time.sleep(0.5)
    assert f"sudoku-batch submit --resume {job} {path} --broker {stack.url}" in status.stdout
    other = tmp_path / "other.txt"
    other.write_text("\n".join(puzzles[1:]) + "\n")
    refused = run_cli("submit", "--resume", job, str(other), "--broker", stack.url)
    assert refused.returncode == 2 and "not the input submitted" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1

    resumed = resume_until_taken(job, path, stack.url)
    assert resumed.returncode == 0 and resumed.stdout.strip() == job, resumed.stderr
    _, err = collect.communicate(timeout=120)
    assert collect.returncode == 0, err
    check_records(records_of(out), puzzles)  # every line once, in order, every `solved` one verified
    assert "submission incomplete" not in run_cli("status", job, "--broker", stack.url).stdout
    assert client.hlen(f"sbatch:job:{job}:outbox") == 0
    assert run_cli("purge", job, "--broker", stack.url).returncode == 0
    client.close()


JOB = "0b" * 16
LINES = SAMPLE.read_text().splitlines()


def chunk_message(texts: list[str], chunk: int = 0, time_limit: float | None = None) -> dict:
    """A chunk task exactly as a JSON message carries it."""
    task = chunk_task(JOB, texts, chunk=chunk, seeded=False, time_limit=time_limit)
    return json.loads(json.dumps(task.model_dump(mode="json")))


def stored_records(fake_redis, chunk: int = 0) -> list[dict]:
    """The records a worker stored for a chunk of JOB."""
    payload = fake_redis.get(f"sbatch:job:{JOB}:part:{chunk}:0")  # answered whole: one part from row 0
    return [json.loads(line) for line in Part.decode(payload).lines()]


def new_job(fake_redis) -> None:
    """Create JOB's metadata, as a producer does."""
    fake_redis.hset(f"sbatch:job:{JOB}:meta", mapping={"created": str(time.time()), "state": "producing"})


def test_a_puzzle_that_makes_the_solver_raise_is_an_error_and_the_rest_of_its_chunk_is_solved(monkeypatch):
    import solvers.api
    from pipeline.contract.tasks import ChunkTask
    from pipeline.engine.solve import solve_chunk

    poison = LINES[3]
    real = solvers.api.solve_many

    def fragile(texts, **kwargs):
        if poison in texts:
            raise RuntimeError("kernel exploded")
        return real(texts, **kwargs)

    monkeypatch.setattr(solvers.api, "solve_many", fragile)
    result = solve_chunk(ChunkTask.model_validate(chunk_message(LINES[:8])))
    records = [json.loads(line) for line in result.lines()]
    assert [r["status"] for r in records] == ["solved"] * 3 + ["error"] + ["solved"] * 4
    assert records[3]["error"] == "RuntimeError: kernel exploded"
    assert result.header.stats.counts == {"solved": 7, "error": 1}
    assert [p.index for p in result.header.stats.problems] == [3]


def test_the_worker_carries_on_after_a_solver_raises(fake_redis, monkeypatch):
    tasks = pytest.importorskip("worker.tasks")
    import solvers.api

    real = solvers.api.solve_many
    monkeypatch.setattr(
        solvers.api,
        "solve_many",
        lambda texts, **kw: (
            (_ for _ in ()).throw(ValueError("bad")) if LINES[0] in texts else real(texts, **kw)
        ),
    )
    new_job(fake_redis)
    assert tasks.handle(chunk_message(LINES[:4], 0), fake_redis) == 4
    assert tasks.handle(chunk_message(LINES[4:8], 1), fake_redis) == 4  # the same process, next chunk
    assert [r["status"] for r in stored_records(fake_redis, 0)] == ["error", "solved", "solved", "solved"]
    assert [r["status"] for r in stored_records(fake_redis, 1)] == ["solved"] * 4


def test_a_chunk_past_its_time_limit_comes_back_as_timeouts_not_lost_work(fake_redis, monkeypatch):
    tasks = pytest.importorskip("worker.tasks")
    from celery.exceptions import SoftTimeLimitExceeded

    def too_slow(*args, **kwargs):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr("pipeline.engine.runner.solve_parts", too_slow)
    new_job(fake_redis)
    assert tasks.handle(chunk_message(LINES[:5]), fake_redis) == 5
    records = stored_records(fake_redis)
    assert [r["status"] for r in records] == ["timeout"] * 5
    assert all("time limit" in r["error"] and r["solution"] is None for r in records)
    assert fake_redis.lrange(f"sbatch:job:{JOB}:arrivals", 0, -1) == [b"0:0"]  # answered: collector moves on


def test_a_delivery_past_the_attempt_limit_never_replaces_a_chunks_good_result(fake_redis, monkeypatch):
    tasks = pytest.importorskip("worker.tasks")
    from celery.exceptions import SoftTimeLimitExceeded

    new_job(fake_redis)
    message = chunk_message(LINES[:4])
    assert tasks.handle(message, fake_redis) == 4  # solved and stored
    fake_redis.hset(f"sbatch:job:{JOB}:attempts", 0, tasks.settings.max_attempts)  # delivered again since
    assert tasks.handle(message, fake_redis) == 0  # past the limit, but answered: nothing written
    monkeypatch.setattr(
        "pipeline.engine.runner.solve_parts", lambda *_, **__: (_ for _ in ()).throw(SoftTimeLimitExceeded())
    )
    fake_redis.hset(f"sbatch:job:{JOB}:attempts", 0, 0)
    assert tasks.handle(message, fake_redis) == 0  # a redelivery past its time limit: the answer stays too
    assert [r["status"] for r in stored_records(fake_redis)] == ["solved"] * 4
    assert fake_redis.lrange(f"sbatch:job:{JOB}:arrivals", 0, -1) == [b"0:0"]
    fake_redis.hset(f"sbatch:job:{JOB}:attempts", 1, tasks.settings.max_attempts)
    assert tasks.handle(chunk_message(LINES[4:6], chunk=1), fake_redis) == 2  # no answer yet: errors
    assert [r["status"] for r in stored_records(fake_redis, 1)] == ["error"] * 2


def test_a_generate_delivery_past_the_attempt_limit_keeps_the_chunk_already_generated(fake_redis):
    tasks = pytest.importorskip("worker.tasks")
    from pipeline.contract.generate import GenerateTask

    payload = {"job": JOB, "chunk": 0, "box": "2x2", "count": 3, "seed": 5, "options": {}}
    new_job(fake_redis)
    assert tasks.handle(payload, fake_redis, GenerateTask) == 3
    first = fake_redis.get(f"sbatch:job:{JOB}:result:0")
    fake_redis.hset(f"sbatch:job:{JOB}:attempts", 0, tasks.settings.max_attempts)
    assert tasks.handle(payload, fake_redis, GenerateTask) == 0
    assert fake_redis.get(f"sbatch:job:{JOB}:result:0") == first and json.loads(first)["error"] is None


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_whole_worker_killed_mid_chunk_loses_nothing_the_other_takes_its_chunk(
    stack, slow_corpus, tmp_path
):
    # Runs last in the module: it leaves one worker of the stack dead.
    client, victim = stack.client(), stack.workers[0]
    solve, out, puzzles = solve_slow(stack, slow_corpus, tmp_path, SMALL_CHUNKS)
    deadline = time.monotonic() + 60
    while True:  # until the victim's pool process is solving a chunk
        running = {k.decode(): v.decode() for k, v in client.hgetall("sbatch:current").items()}
        pool = children(victim.pid)
        mine = [v for k, v in running.items() if int(k.rsplit(":", 1)[1]) in pool]
        if mine:
            break
        assert time.monotonic() < deadline and solve.poll() is None, solve.communicate()
        time.sleep(0.005)
    for pid in [*pool, victim.pid]:  # the machine is gone: main process and pool, no goodbye
        os.kill(pid, signal.SIGKILL)
    victim.wait(10)
    _, err = solve.communicate(timeout=90)
    assert solve.returncode == 0, err
    check_records(records_of(out), puzzles)
    client.close()
