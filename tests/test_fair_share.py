"""Fair share and priorities between jobs on one broker (issue 33): kombu's Redis priority lists, a job's
class (`--priority`) and its least-attained-service level (`pipeline.contract.tasks.message_priority`),
with a real redis-server and real `sudoku-batch worker` processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from client.batch import BatchClient
from client.config import ClientSettings
from client.resend import Resender
from pipeline.contract.keys import JobKeys, queue_lists, queued
from pipeline.contract.tasks import DEFAULT_QUEUE, PRIORITIES, message_priority
from tests.conftest import (
    SAMPLE,
    RedisServer,
    check_records,
    cli_command,
    run_cli,
    start_workers,
    stop_all,
    wait_until,
)

STUCK = "12345678." + "........9" + "." * 63  # no solution: annealing searches it until the time limit
EASY = [ln for ln in SAMPLE.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
ONE_PER_CHUNK = {"SUDOKU_BATCH_MAX_CHUNK_BYTES": "82"}  # one 9x9 puzzle per chunk
SLOW = ("--portfolio", "annealing", "--time-limit", "0.3", "--escalate-after", "0")  # each chunk ~0.3 s
NOBODY = "sbatch-test-nobody"  # a queue no worker consumes


@pytest.fixture
def lonely_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server of the test with no worker on it."""
    server = RedisServer(tmp_path_factory.mktemp("fair-redis"), appendonly=False)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def lines(tmp_path: Path, name: str, texts: list[str]) -> Path:
    path = tmp_path / f"{name}.txt"
    path.write_text("\n".join(texts) + "\n")
    return path


def submit(url: str, path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """`sudoku-batch submit PATH ARGS`: the job's id."""
    done = run_cli("submit", str(path), "--broker", url, *args, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def answered(client: redis.Redis, job: str) -> int:
    """Chunks of `job` whose result arrived."""
    return int(client.llen(JobKeys(job).arrivals))


def first_done_then(client: redis.Redis, first: str, chunks: int, other: str) -> int | None:
    """The chunks of `other` answered when all `chunks` of `first` are (one snapshot); None before."""
    with client.pipeline(transaction=True) as pipe:
        pipe.llen(JobKeys(first).arrivals)
        pipe.llen(JobKeys(other).arrivals)
        mine, theirs = pipe.execute()
    return theirs + 1 if mine >= chunks else None  # + 1: wait_until wants a truthy value for 0 too


def test_the_priority_classes_and_levels_order_every_high_chunk_first_and_every_low_one_last():
    levels = {name: {message_priority(name, chunk) for chunk in range(100_000)} for name in PRIORITIES}
    assert max(levels["high"]) < min(levels["normal"]) and max(levels["normal"]) < min(levels["low"])
    assert [message_priority("normal", c) for c in (0, 1, 3, 4, 15, 16, 10**9)] == [3, 4, 4, 5, 5, 6, 6]
    assert message_priority(None, 0) == message_priority("normal", 0) == message_priority("junk", 0)
    assert queue_lists("q")[0] == "q" and len(set(queue_lists("q"))) == 10


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_small_job_submitted_behind_a_big_jobs_queued_chunks_is_answered_before_they_run(
    lonely_redis, tmp_path
):
    url = lonely_redis.url
    client = redis.Redis.from_url(url)
    big = submit(url, lines(tmp_path, "big", [STUCK] * 20), *SLOW, env=ONE_PER_CHUNK)  # 20 chunks of 0.3 s
    small = submit(url, lines(tmp_path, "small", EASY), "--escalate-after", "0")  # one chunk, behind them
    assert queued(client, DEFAULT_QUEUE) == 21
    procs = start_workers(url, 1, tmp_path)
    try:
        big_then = (
            wait_until(lambda: first_done_then(client, small, 1, big), 60, "the small job answered") - 1
        )
        assert big_then <= 2, f"{big_then} of the big job's 20 chunks ran first"  # FIFO: all 20
        out = tmp_path / "small.jsonl"
        got = run_cli("collect", small, "--broker", url, "-o", str(out), "--ordered", "-q", "--timeout", "60")
        assert got.returncode == 0, got.stderr
        check_records([json.loads(x) for x in out.read_text().splitlines()], EASY)
        assert run_cli("purge", big, "--broker", url).returncode == 0
    finally:
        stop_all(procs)
        client.close()


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_high_priority_job_overtakes_every_queued_chunk_of_a_normal_job_submitted_before_it(
    lonely_redis, tmp_path
):
    url = lonely_redis.url
    client = redis.Redis.from_url(url)
    big = submit(url, lines(tmp_path, "big", [STUCK] * 20), *SLOW, env=ONE_PER_CHUNK)
    high = submit(url, lines(tmp_path, "high", [STUCK] * 6), *SLOW, "--priority", "high", env=ONE_PER_CHUNK)
    status = json.loads(run_cli("status", high, "--broker", url, "--json").stdout)
    assert status["priority"] == "high"
    listed = json.loads(run_cli("jobs", "--broker", url, "--json").stdout)
    assert [j["priority"] for j in listed] == ["high", "normal"]
    procs = start_workers(url, 1, tmp_path)
    try:  # as a normal job its chunks 4 and 5 (level 5) would wait for the big job's chunks 0-15
        big_then = wait_until(lambda: first_done_then(client, high, 6, big), 60, "the high job answered") - 1
        assert big_then <= 2, f"{big_then} of the normal job's 20 chunks ran before the high job's 6"
        assert run_cli("purge", big, "--broker", url).returncode == 0
    finally:
        stop_all(procs)
        client.close()


def test_a_priority_outside_the_classes_is_refused_in_one_line(tmp_path):
    got = run_cli("submit", str(SAMPLE), "--broker", "redis://127.0.0.1:1/0", "--priority", "urgent")
    assert got.returncode == 2 and "--priority" in got.stderr and "urgent" in got.stderr, got.stderr
    with (
        BatchClient() as batch,
        pytest.raises(ValueError, match="priority 'urgent': must be one of high, normal"),
    ):
        batch.submit(EASY, priority="urgent")


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_many_clients_with_a_worker_joining_and_one_leaving_answer_every_line_exactly_once(
    lonely_redis, tmp_path
):
    url = lonely_redis.url
    client = redis.Redis.from_url(url)
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first = start_workers(url, 1, tmp_path / "first")
    second: list[subprocess.Popen[bytes]] = []
    solves: list[tuple[subprocess.Popen[str], Path, list[str]]] = []
    env = {**os.environ, "SUDOKU_BATCH_MAX_CHUNK_BYTES": str(82 * 3)}  # 3 puzzles a chunk: many chunks
    try:
        for i, priority in enumerate(["high", "normal", "low", "normal"]):
            puzzles = [p for easy in EASY[i * 4 : i * 4 + 8] for p in (easy, STUCK)]  # 6 chunks of 0.3-0.6 s
            path, out = lines(tmp_path, f"in{i}", puzzles), tmp_path / f"out{i}.jsonl"
            cmd = [*cli_command(), "solve", str(path), "--broker", url, "-o", str(out), "--ordered", "-q"]
            cmd += [*SLOW, "--priority", priority]
            solves.append((subprocess.Popen(cmd, env=env, text=True), out, puzzles))
        wait_until(lambda: client.hlen("sbatch:current"), 60, "the first worker solving")
        second = start_workers(url, 1, tmp_path / "second")  # joins mid-way
        wait_until(lambda: client.hlen("sbatch:current") == 2, 60, "both workers solving")
        first[0].send_signal(signal.SIGTERM)  # leaves mid-chunk: its chunk goes back on the queue
        assert first[0].wait(30) == 128 + signal.SIGTERM
        assert any(proc.poll() is None for proc, _, _ in solves), "the worker left after every job ended"
        for proc, out, puzzles in solves:
            assert proc.wait(240) == 0
            check_records(
                [json.loads(x) for x in out.read_text().splitlines()], puzzles
            )  # each once, in turn
        assert queued(client, DEFAULT_QUEUE) == 0
    finally:
        for proc, _, _ in solves:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        stop_all([*first, *second])
        client.close()


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_the_resend_sweep_sends_a_lost_chunk_again_at_the_priority_it_was_first_sent_at(lonely_redis):
    client = redis.Redis.from_url(lonely_redis.url)
    settings = ClientSettings(queue=NOBODY, max_chunk_bytes=82, resend_after=0.01)  # no worker takes them
    with BatchClient(lonely_redis.url, settings=settings) as batch:
        job = batch.submit(EASY[:6], priority="high", bounded=False)
        job.wait_submitted(60)
        want = {name: 0 for name in queue_lists(NOBODY)}
        for chunk in range(6):
            want[queue_lists(NOBODY)[message_priority("high", chunk)]] += 1
        lists = lambda: {name: int(client.llen(name)) for name in queue_lists(NOBODY)}  # noqa: E731
        assert lists() == want and want[NOBODY] == 1  # chunk 0: list 0, chunks 1-3: 1, chunks 4-5: 2
        client.delete(*queue_lists(NOBODY))  # every message lost
        time.sleep(0.02)  # older than `resend_after` (10 ms)
        resender = Resender(batch._redis_store(), job.id, batch._celery_transport, settings.resend_after)
        resender._last -= 1  # its last sweep long ago
        assert resender.sweep(idle=1.0) == 6
        assert lists() == want
    client.close()


def test_the_workers_orphan_sweep_sends_a_dropped_chunk_again_at_its_jobs_priority(fake_redis):
    from worker import heartbeat

    class App:
        sent: list[dict] = []

        def send_task(self, name: str, **options: object) -> None:
            self.sent.append(options)

    job = "0d" * 16
    keys = JobKeys(job)
    fake_redis.hset(keys.meta, mapping={"state": "producing", "priority": "low"})
    fake_redis.hset(keys.outbox, "5", "kept")
    app = App()
    assert heartbeat.resend(fake_redis, app, f"{job}:5")
    assert app.sent[0]["priority"] == message_priority("low", 5) == 9
    fake_redis.hdel(keys.meta, "priority")  # a job of a client before the classes: the default's
    assert heartbeat.resend(fake_redis, app, f"{job}:5")
    assert app.sent[1]["priority"] == message_priority("normal", 5)


def test_the_queues_length_sums_its_priority_lists_so_no_resend_fires_while_chunks_wait(fake_redis):
    from client.redis_store import RedisJobStore

    store = RedisJobStore(fake_redis, ClientSettings())
    fake_redis.lpush(queue_lists(DEFAULT_QUEUE)[message_priority("low", 99)], b"{}")
    fake_redis.lpush(queue_lists(DEFAULT_QUEUE)[message_priority("normal", 2)], b"{}")
    assert store.queued() == 2  # the resend sweeps wait for these: the chunks are not lost
