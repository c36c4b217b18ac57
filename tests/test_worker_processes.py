"""A worker's pool processes die with it (Celery's prefork pool asks the kernel for it, PR_SET_PDEATHSIG);
the session's workers never reach a test's own redis database."""

from __future__ import annotations

import os
import time

import pytest

from pipeline.contract.keys import current_key, workers_key
from tests.conftest import alive, start_workers, stop_all, url_of
from tests.test_escalation import hard_puzzle

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_a_pool_process_busy_solving_dies_with_its_sigkilled_worker(redis_client, tmp_path):
    from client.batch import BatchClient

    url = url_of(redis_client)
    (proc,) = start_workers(url, 1, tmp_path)
    busy: list[int] = []
    try:
        with BatchClient(url) as client:  # a search of about ten seconds: the process is busy when killed
            client.submit([hard_puzzle()], portfolio="propagation", time_limit=60, escalate_after=0)
            deadline = time.monotonic() + 60
            while not busy and time.monotonic() < deadline:
                busy = [int(name.decode().rsplit(":", 1)[1]) for name in redis_client.hkeys(current_key())]
                time.sleep(0.05)
            assert busy, "the worker never started the chunk"
            proc.kill()  # SIGKILL: the worker's main process runs no clean-up
            proc.wait(5)
            deadline = time.monotonic() + 5
            while alive(busy[0]) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not alive(busy[0]), "the pool process outlived its worker"
    finally:
        stop_all([proc])
        for pid in busy:
            if alive(pid):
                os.kill(pid, 9)


def test_the_session_workers_never_beat_into_a_tests_own_database(workers, redis_client):
    time.sleep(2.5)  # the session's workers beat every second
    assert redis_client.zcard(workers_key()) == 0
