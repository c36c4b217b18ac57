"""The real `sudoku-batch serve`: usage errors in one line, and no process left whatever signal ends it."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from tests.conftest import cli_command, free_port, wait_until
from tests.test_interrupts import STUCK, kill_session, session_processes, start, wait_until_gone


def wait_served(proc: subprocess.Popen[str], port: int, timeout: float = 90.0) -> None:
    """Wait until the server answers its page (the first start may compile the solvers)."""
    deadline, step = time.monotonic() + timeout, 0.01
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"serve exited {proc.returncode}: {proc.communicate(timeout=10)}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as page:
                if page.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            time.sleep(step)
            step = min(step * 2, 0.2)
    proc.kill()
    pytest.fail(f"serve did not answer within {timeout} s")


def post_json(port: int, path: str, body: dict, timeout: float = 30.0) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return json.loads(answer.read())


def solve_stuck(port: int) -> None:
    """Ask for a puzzle the stochastic solvers work on until their time limit; the server dies first."""
    with contextlib.suppress(OSError):  # urllib's errors are OSErrors
        post_json(port, "/api/solve", {"puzzle": STUCK, "portfolio": "stochastic", "time_limit": 30}, 60)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--host", "0.0.0.0"], "give --token"),
        (["--token", "short"], "at least 16"),
        (["--max-time-limit", "0"], "--max-time-limit"),
        (["--max-upload-mb", "1e9"], "--max-upload-mb"),
        (["--max-jobs-kept", "0"], "--max-jobs-kept"),
        (["--max-memory-mb", "-5"], "--max-memory-mb"),
        (["--port", "70000"], "--port"),
        (["--workers", "100000"], "--workers"),
        (["--broker", "http://nowhere"], "expected redis://"),
    ],
)
def test_serve_refuses_bad_options_in_one_line(args, words):
    proc = subprocess.run([*cli_command(), "serve", *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_serve_on_a_port_in_use_says_so_in_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [*cli_command(), "serve", "--port", str(port)], capture_output=True, text=True, timeout=60
        )
    assert proc.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_no_process_outlives_serve_whatever_signal_ends_it(sig):
    port = free_port()
    proc = start(["serve", "--port", str(port), "--workers", "1"])
    try:
        wait_served(proc, port)
        assert post_json(port, "/api/solve", {"puzzle": "." * 16})["status"] == "solved"
        threading.Thread(
            target=solve_stuck, args=(port,), daemon=True
        ).start()  # solving when the signal comes
        wait_until(  # the server, a job process, a puzzle process
            lambda: len(session_processes(proc.pid)) >= 3, 30, "server, job and puzzle processes"
        )
        proc.send_signal(sig)
        code = proc.wait(timeout=20)
        assert wait_until_gone(proc.pid) == []
        assert code == (-signal.SIGKILL if sig == signal.SIGKILL else 128 + sig)
        if sig != signal.SIGKILL:  # one line, not the cut-off request's CancelledError traceback
            _, err = proc.communicate(timeout=5)
            assert err.splitlines()[1:] == [f"sudoku-batch: interrupted ({sig.name}), exit {128 + sig}"], err
    finally:
        kill_session(proc.pid)
