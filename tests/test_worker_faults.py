"""Worker faults against real workers and a real redis-server: a purge stops a running job and leaves no key,
hostile messages are each dropped in one log line, a full Redis is survived.

Each test ends by checking that the workers still solve a normal job.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest
import redis

from tests.conftest import SAMPLE, cli_command

STUCK = "12345678." + "........9" + "." * 63  # no solution; stochastic solvers cannot prove it: they go on
ONE_PER_CHUNK = {"SUDOKU_BATCH_MAX_CHUNK_BYTES": "82"}  # one 9x9 puzzle per chunk


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*cli_command(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def job_keys(client: redis.Redis, job: str) -> list[bytes]:
    """Every key of `job` in the broker."""
    return sorted(client.keys(f"sbatch:job:{job}:*"))


def solving(client: redis.Redis, job: str) -> list[bytes]:
    """The `job:chunk` entries of `job` live workers are solving now."""
    return [v for v in client.hvals("sbatch:current") if v.startswith(job.encode())]


def still_solves_a_normal_job(url: str, tmp_path) -> None:
    """The workers answer a small job completely (they survived whatever the test did)."""
    out = tmp_path / "normal.jsonl"
    proc = run_cli("solve", str(SAMPLE), "--broker", url, "-o", str(out), "-q", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert len(out.read_text().splitlines()) == len(
        [ln for ln in SAMPLE.read_text().splitlines() if ln.strip()]
    )


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_purge_stops_the_workers_solving_the_job_and_no_key_of_it_survives(workers, tmp_path):
    client = redis.Redis.from_url(workers)
    path = tmp_path / "stuck.txt"
    path.write_text((STUCK + "\n") * 4)
    submitted = run_cli(
        "submit",
        str(path),
        "--broker",
        workers,
        "--portfolio",
        "stochastic",
        "--time-limit",
        "60",
        env=ONE_PER_CHUNK,
    )
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    deadline = time.monotonic() + 60
    while len(solving(client, job)) < 2:  # both workers on a 60 s puzzle
        assert time.monotonic() < deadline, client.hgetall("sbatch:current")
        time.sleep(0.05)
    purged = run_cli("purge", job, "--broker", workers, env={"SUDOKU_BATCH_STOP_TTL": "3"})
    assert purged.returncode == 0, purged.stderr
    deadline = time.monotonic() + 10  # generous: the solvers check the stop key every 0.25 s
    while solving(client, job):
        assert time.monotonic() < deadline, "the workers went on solving a purged job"
        time.sleep(0.05)
    time.sleep(1.0)  # anything a worker would still write, it has written by now
    assert job_keys(client, job) == [f"sbatch:job:{job}:stop".encode()]
    time.sleep(3.0)  # the stop key's own TTL
    assert job_keys(client, job) == []
    status = run_cli("status", job, "--broker", workers)
    assert status.returncode == 1 and "no such job" in status.stderr
    still_solves_a_normal_job(workers, tmp_path)
    client.close()
