"""Numbers at the edge: process counts and time limits are bounded with a one-line usage error (exit 2),
before any process is forked or any job exists."""

from __future__ import annotations

import pytest

from client.pool import max_workers
from tests.conftest import SAMPLE, run_cli, url_of


@pytest.mark.parametrize(
    "args",
    [
        ["solve", str(SAMPLE), "--workers", "10000"],
        ["generate", "--count", "5", "--workers", "10000"],
        ["worker", "--broker", "redis://127.0.0.1:1/0", "--concurrency", "10000"],
    ],
)
def test_a_process_count_beyond_what_the_machine_can_use_is_refused_in_one_line(args):
    proc = run_cli(*args)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "10000 is more processes than this machine can use" in line and f"at most {max_workers()}" in line


def test_the_most_processes_allowed_still_run(tmp_path):
    out = tmp_path / "out.jsonl"
    proc = run_cli("solve", str(SAMPLE), "-o", str(out), "-q", "--workers", str(min(max_workers(), 3)))
    assert proc.returncode == 0, proc.stderr


def test_the_library_refuses_too_many_local_processes_too():
    from client.batch import BatchClient

    with pytest.raises(ValueError, match="more processes than this machine can use"):
        BatchClient(workers=max_workers() + 1)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e9", "-1"])  # 0 is no limit
def test_a_time_limit_that_is_not_a_sane_number_of_seconds_is_a_usage_error(value, tmp_path):
    proc = run_cli("solve", str(SAMPLE), f"--time-limit={value}", "-o", str(tmp_path / "o.jsonl"))
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("sudoku-batch: error: --time-limit") and "at most 86400 seconds" in line


@pytest.mark.integration
@pytest.mark.parametrize("command", ["solve", "submit"])
def test_a_bad_time_limit_with_a_broker_leaves_no_job_behind(command, redis_client):
    proc = run_cli(command, str(SAMPLE), "--time-limit", "nan", "--broker", url_of(redis_client))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert redis_client.keys("sbatch:job:*") == []


@pytest.mark.parametrize("value", ["nan", "inf", "0", "1e12"])
def test_a_collect_timeout_that_is_not_a_sane_number_of_seconds_is_a_usage_error(value):
    proc = run_cli("collect", "ab" * 16, "--broker", "redis://127.0.0.1:1/0", "--timeout", value)
    assert proc.returncode == 2 and "--timeout" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_the_process_bound_follows_cores_and_available_memory_and_the_default_stays_within_it(monkeypatch):
    import client.pool as pool
    from client.batch import BatchClient

    monkeypatch.setattr(pool, "default_workers", lambda: 8)
    monkeypatch.setattr(pool, "available_mb", lambda: 100_000)
    assert pool.max_workers() == 8 * pool.PROCESSES_PER_CORE
    monkeypatch.setattr(pool, "available_mb", lambda: 3 * pool.PROCESS_MB + 1)
    assert pool.max_workers() == 3
    monkeypatch.setattr(pool, "available_mb", lambda: 10)  # almost no memory: still one process
    assert pool.max_workers() == 1
    monkeypatch.setattr("client.batch.default_workers", lambda: 8)
    monkeypatch.setattr("client.batch.max_workers", pool.max_workers)
    assert BatchClient().workers == 1
