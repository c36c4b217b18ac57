"""Stop flags: a raised flag ends a batch or a race at its next slice; a poller raises it on a condition."""

from __future__ import annotations

import logging
import threading
import time

from pipeline.engine.stop import StopPoller
from solvers.api import STOPPED_ERROR, solve, solve_many
from solvers.kernel.stop import new_flag, raise_flag
from tests.conftest import SAMPLE, wait_until

HARD = "4.....8.5.3..........7......2.....6.....8.4......1.......6.3.7.5..2.....1.4......"


def test_a_flag_raised_before_the_batch_answers_every_puzzle_stopped():
    flag = new_flag()
    raise_flag(flag)
    lines = SAMPLE.read_text().splitlines()[:20]
    for portfolio in ("fast", "race"):
        results = solve_many(lines, portfolio=portfolio, time_limit=30, stop=flag)
        assert {r.status.value for r in results} == {"timeout"}
        assert {r.error for r in results} == {STOPPED_ERROR}


def test_a_poller_stops_a_long_race_soon_after_its_condition_holds():
    asked = time.monotonic() + 0.3
    start = time.monotonic()
    with StopPoller(lambda: time.monotonic() > asked, 0.05) as poller:
        result = solve(HARD, portfolio="stochastic", time_limit=60, stop=poller.flag)  # else: 60 s
    assert time.monotonic() - start < 10  # generous: the race checks the flag every few milliseconds
    assert poller.raised and result.status.value in ("timeout", "approximate")


def test_a_poller_whose_condition_fails_keeps_asking_and_never_stops_the_work():
    errors: list[BaseException] = []
    calls = [0]

    def flaky() -> bool:
        calls[0] += 1
        raise ConnectionError("broker away")

    with StopPoller(flaky, 0.01, on_error=errors.append) as poller:
        wait_until(lambda: calls[0] >= 3, 10, "three calls of the condition")
    assert not poller.raised and calls[0] >= 3 and len(errors) == calls[0]


def test_a_poller_without_on_error_logs_one_line_for_a_run_of_failures(caplog):
    calls, answered = [0], threading.Event()

    def flaky() -> bool:
        calls[0] += 1
        if calls[0] < 4:
            raise ConnectionError("broker away")
        answered.set()
        return True

    with caplog.at_level(logging.WARNING, "pipeline.engine.stop"), StopPoller(flaky, 0.01) as poller:
        assert answered.wait(10)
    lines = [r.getMessage() for r in caplog.records if r.name == "pipeline.engine.stop"]
    assert len(lines) == 1 and "broker away" in lines[0]
    assert calls[0] == 4 and poller.raised
