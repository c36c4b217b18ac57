"""What a job cost: the CPU and wall seconds of every run of its chunks, counted where they run (a worker's
pool process, a local process, the command's own thread) into the job's meta (`cpu_ns`, `chunk_wall_ns`),
and shown by `status`, `jobs --json`, the report, a dataset's manifest and the page; within 25% of what the
worker processes' own CPU counters say (/proc)."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import client.config
from client.batch import BatchClient
from client.cli import main
from client.config import ClientSettings
from client.redis_store import RedisJobStore
from pipeline.engine.runner import execute
from tests.conftest import (
    RedisServer,
    children,
    corpus_file,
    cpu_seconds,
    run_cli,
    start_workers,
    stop_all,
    wait_until,
)

HARD = "9x9/tdoku_puzzles5_forum_hardest_1905_11plus.txt"  # 48,766 puzzles: ~1.5 CPU s with propagation
JOB = "c0" * 16
URL = "redis://fake:6379/0"
pytestmark = pytest.mark.timeout(300)


def hard_lines(n: int) -> list[str]:
    """`n` lines of the forum-hardest corpus (repeated when it holds fewer)."""
    lines = corpus_file(HARD).read_text().splitlines()
    return (lines * (n // len(lines) + 1))[:n]


def pool_processes(procs: list[subprocess.Popen[bytes]]) -> list[int]:
    """The pool processes of `sudoku-batch worker` processes (the children of each, where chunks run)."""
    return [child for proc in procs for child in children(proc.pid)]


def pool_cpu(pids: list[int]) -> float:
    return sum(cpu_seconds(pid) for pid in pids)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[int]]]:
    """A redis-server of this module's own and two real workers on it (no other worker takes its chunks):
    the URL and the workers' pool processes."""
    server = RedisServer(tmp_path_factory.mktemp("cost-redis"), appendonly=False)
    server.start()
    procs = start_workers(server.url, 2, tmp_path_factory.mktemp("cost-workers"))
    try:
        pools = wait_until(
            lambda: pool_processes(procs) if len(pool_processes(procs)) == 2 else None, 30, "pools"
        )
        yield server.url, pools
    finally:
        stop_all(procs)
        server.stop()


def settled(url: str) -> None:
    """Wait until no worker process runs a task (each run charges its end before it says it is idle)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        wait_until(lambda: client.hlen("sbatch:current") == 0, 30, "idle workers")
    finally:
        client.close()


def submitted(url: str, path: Path) -> str:
    """Submit `path` to the fleet, wait until every puzzle is answered and every run has charged the job
    (kept on the broker: no collection purges it); its id."""
    done = run_cli(*["submit", str(path), "--broker", url])
    assert done.returncode == 0, done.stderr
    job = re.findall(r"\b[0-9a-f]{32}\b", done.stdout + done.stderr)[0]
    status = BatchClient(url).job(job).status
    wait_until(lambda: status().phase == "done", 120, f"job {job} done")
    settled(url)
    return job


def status_json(url: str, job: str) -> dict:
    done = run_cli(*["status", job, "--broker", url, "--json"])
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_jobs_cpu_seconds_are_within_a_quarter_of_what_the_worker_processes_used(fleet, tmp_path, capsys):
    url, pools = fleet
    path = tmp_path / "hard.txt"
    path.write_text("\n".join(hard_lines(100_000)) + "\n")
    ratios = []
    for _ in range(3):
        settled(url)
        before = pool_cpu(pools)
        job = submitted(url, path)
        used = pool_cpu(pools) - before
        status = status_json(url, job)
        ratios.append(status["cpu_seconds"] / used)
        assert status["chunk_seconds"] >= 0.9 * status["cpu_seconds"] > 0
        run_cli(*["purge", job, "--broker", url])
    with capsys.disabled():
        print(f"\njob cpu_seconds / pool processes' /proc CPU: {[round(r, 3) for r in ratios]}")
    assert abs(statistics.median(ratios) - 1) <= 0.25, ratios


def test_status_jobs_and_the_report_show_what_a_job_cost(fleet, tmp_path):
    url, _ = fleet
    path = tmp_path / "hard.txt"
    path.write_text("\n".join(hard_lines(20_000)) + "\n")
    report = tmp_path / "r.html"
    out = str(tmp_path / "o.jsonl")
    done = run_cli(*["solve", str(path), "--broker", url, "-o", out, "--report", str(report)])
    assert done.returncode == 0, done.stderr
    page = report.read_text()
    assert "<th>cost</th><td>" in page and " CPU s on its workers, " in page and " s of chunks" in page
    job = submitted(url, path)
    listed = json.loads(run_cli(*["jobs", "--broker", url, "--json"]).stdout)
    assert listed[0]["job"] == job and listed[0]["cpu_seconds"] > 0 and listed[0]["chunk_seconds"] > 0
    text = run_cli(*["status", job, "--broker", url]).stdout
    assert "cost: " in text and " CPU s on its workers, " in text, text


def test_a_dataset_manifest_says_what_its_job_cost(fleet, tmp_path):
    url, _ = fleet
    path = tmp_path / "hard.txt"
    path.write_text("\n".join(hard_lines(20_000)) + "\n")
    done = run_cli(*["solve", str(path), "--broker", url, "-o", f"{tmp_path / 'ds'}/", "-q"])
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "ds" / "_manifest.json").read_text())
    assert manifest["cpu_seconds"] > 0 and manifest["chunk_seconds"] > 0


def test_an_embedded_job_counts_what_its_local_processes_and_this_process_spent(tmp_path):
    earlier = {t for t in threading.enumerate() if t.name == "parts"}  # a killed pool's thread waits on
    batch = BatchClient(None, workers=2)  # (daemon): an earlier test's in this process is not this job's
    try:
        job = batch.submit(hard_lines(60_000))
        assert sum(1 for _ in job.results()) == 60_000
        pids = batch.pool.pids()
        wait_until(lambda: all(_state(pid) == "S" for pid in pids), 30, "idle local processes")
        used = pool_cpu(pids)  # these processes solved nothing before: all of their CPU since the fork
        batch.close()
        mine = lambda: [t for t in threading.enumerate() if t.name == "parts" and t not in earlier]  # noqa: E731
        wait_until(lambda: not mine(), 30, "parts handed over")
        cost = job.status().cpu_seconds
        print(f"embedded: job cpu_seconds {cost:.3f} / local processes' /proc CPU {used:.3f}")
        assert abs(cost / used - 1) <= 0.25, (cost, used)
        tiny = BatchClient(None, workers=1).submit(hard_lines(3))  # solved in this process, on a thread
        assert sum(1 for _ in tiny.results()) == 3
        assert tiny.status().cpu_seconds > 0 and tiny.status().chunk_seconds > 0
    finally:
        batch.close()


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]


def test_a_chunk_run_again_after_its_first_run_failed_is_charged_for_both_runs(redis_client):
    from tests.conftest import chunk_task
    from worker.board import RedisPort

    store = RedisJobStore(redis_client, ClientSettings())
    store.create(JOB, {"created": f"{time.time():.3f}", "inputs": "in.txt", "total": "20000"})
    task = chunk_task(JOB, hard_lines(20_000))

    class Dies(RedisPort):
        def publish(self, part):  # the process is lost as it is about to publish: nothing is written
            raise ConnectionError("lost")

    spent = []
    for kind in (Dies, RedisPort):
        start = time.process_time_ns()
        port = kind(redis_client)  # one a run (a message): its meter starts with it
        with contextlib.suppress(
            ConnectionError
        ):  # the first run: counted as it ends, having published nothing
            execute(task, port)
        spent.append(time.process_time_ns() - start)
    counted = int(redis_client.hget(f"sbatch:job:{JOB}:meta", "cpu_ns"))
    assert counted >= 1.5 * spent[1]  # both runs, not the one that published
    assert abs(counted / sum(spent) - 1) <= 0.1, (counted, spent)
    assert store.status(JOB).done == 20_000


@pytest.fixture
def store(fake_redis, monkeypatch) -> RedisJobStore:
    monkeypatch.setattr(client.config, "connect", lambda url, settings: fake_redis)
    return RedisJobStore(fake_redis, ClientSettings())


@pytest.mark.parametrize("value", ["x" * 1_000_000, "-5", "9" * 19, "1e9", ""])
def test_a_cost_field_that_is_no_count_shows_zero_with_one_warning_line(store, capsys, caplog, value):
    store.create(
        JOB, {"created": f"{time.time():.3f}", "state": "produced", "cpu_ns": value, "chunk_wall_ns": "7"}
    )
    with caplog.at_level(logging.WARNING):
        assert main(["status", JOB, "--broker", URL, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["cpu_seconds"] == 0 and status["chunk_seconds"] == 7e-9
    lines = [r.getMessage() for r in caplog.records if "cpu_ns" in r.getMessage()]
    assert len(lines) == 1 and "not a count of ns" in lines[0], lines
    assert not value or value[:20] not in lines[0]  # the value is not echoed


def test_the_job_page_shows_what_the_job_cost(tmp_path):
    from starlette.testclient import TestClient

    from client.pool import WarmPool
    from web.app import create_app
    from web.backend import Backend
    from web.settings import ServeSettings

    batch = BatchClient(None, workers=1, daemon=True)
    batch.pool.start()
    backend = Backend(batch, WarmPool(1).fork(), ServeSettings())
    try:
        with TestClient(create_app(backend), base_url="http://127.0.0.1") as api:
            made = api.post("/api/jobs", content="\n".join(hard_lines(5000)).encode())
            assert made.status_code == 201, made.text
            job = made.json()["job"]
            data = wait_until(
                lambda: (d := api.get(f"/api/jobs/{job}").json())["phase"] == "done" and d, 60, "done"
            )
            assert data["cpu_seconds"] > 0 and data["chunk_seconds"] > 0
            page = api.get(f"/jobs/{job}").text
            assert '<td id="cost">' in page and " CPU s, " in page and " s of chunks</td>" in page
    finally:
        backend.close()


@pytest.mark.parametrize("where", ["workers", "local processes"])
def test_a_generate_job_counts_what_its_chunks_cost(fleet, where):
    from pipeline.contract.generate import GenerateOptions
    from solvers.generate.generator import plan_chunks
    from solvers.model.puzzle import Box

    url = fleet[0] if where == "workers" else None
    with BatchClient(url, workers=2) as batch:
        job = batch.generate(Box(3, 3), plan_chunks(40, 7, 10), GenerateOptions(unique=True), {})
        assert sum(len(chunk.puzzles) for chunk in job.generated()) == 40
        status = job.status()
        assert status.cpu_seconds > 0 and status.chunk_seconds >= status.cpu_seconds * 0.9, status


def test_a_run_whose_end_cannot_be_charged_keeps_its_answers_and_says_so_in_one_line(caplog):
    from pipeline.engine.runner import ListPort
    from tests.conftest import chunk_task

    class Away(ListPort):
        def settle(self, job: str) -> None:
            raise ConnectionError("Redis is away")

    port = Away()
    with caplog.at_level(logging.WARNING):
        assert execute(chunk_task(JOB, hard_lines(3)), port) == 3
    assert sum(len(p) for p in port.parts) == 3
    said = [r.getMessage() for r in caplog.records if "cost" in r.getMessage()]
    assert len(said) == 1 and "not counted" in said[0] and "Redis is away" in said[0], said
