"""Interrupts: the real command in a subprocess (its own session), signalled; no process of it may remain.

Embedded `solve` stops within seconds on SIGINT, SIGTERM or SIGHUP, keeps every finished
record in a valid output file, says how far it got and exits 128 + the signal; a SIGKILL
of the command takes its local processes with it. `solve --broker` interrupted prints the
job id and the commands that finish it, and they do.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis

from tests.conftest import REPO, SAMPLE, check_records, children, cli_command, cpu_seconds, wait_until

STUCK = "12345678." + "........9" + "." * 63  # no solution; stochastic solvers cannot prove it: they go on
EASY = [ln for ln in SAMPLE.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
SMALL_CHUNKS = {"SUDOKU_BATCH_MAX_CHUNK_BYTES": str(83 * 10)}  # ten 9x9 puzzles a chunk


def session_processes(sid: int) -> list[str]:
    """`pid stat command` of every process of session `sid` still alive (zombies are dead: not listed)."""
    out = subprocess.run(["ps", "-eo", "pid=,sid=,stat=,args="], capture_output=True, text=True).stdout
    rows = [line.split(None, 3) for line in out.splitlines()]
    return [" ".join(r) for r in rows if len(r) >= 3 and int(r[1]) == sid and not r[2].startswith("Z")]


def wait_until_gone(sid: int, timeout: float = 10.0) -> list[str]:
    """Wait for every process of session `sid` to end; return those still alive after `timeout` s."""
    deadline = time.monotonic() + timeout
    while (alive := session_processes(sid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def start(args: list[str], env: dict[str, str] | None = None, **kw) -> subprocess.Popen[str]:
    """Start `sudoku-batch ARGS` as the leader of a new session (its processes are found by session id)."""
    return subprocess.Popen(
        [*cli_command(), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **SMALL_CHUNKS, **(env or {})},
        start_new_session=True,
        **kw,
    )


def kill_session(sid: int) -> None:
    """Clean-up after a failed test: SIGKILL whatever is left of the session."""
    for line in session_processes(sid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split()[0]), signal.SIGKILL)


@pytest.fixture
def slow_corpus(tmp_path: Path) -> Path:
    """200 easy puzzles, then puzzles the stochastic portfolio works on until its time limit."""
    path = tmp_path / "slow.txt"
    path.write_text("\n".join((EASY * 10)[:200] + [STUCK] * 6) + "\n")
    return path


def pool_running(proc: subprocess.Popen[str], processes: int = 3, timeout: float = 60.0) -> None:
    """Wait until the command and its local processes all run and have used 0.2 s of CPU more (at work)."""
    deadline = time.monotonic() + timeout
    while len(session_processes(proc.pid)) < processes:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no pool in {timeout} s: {proc.communicate(timeout=10)}")
        time.sleep(0.05)
    pool = children(proc.pid)
    at_start = sum(cpu_seconds(pid) for pid in pool)
    wait_until(
        lambda: sum(cpu_seconds(pid) for pid in pool) - at_start >= 0.2, timeout, "local processes at work"
    )


def started_writing(tmp_path: Path, name: str, proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
    """Wait until the command wrote some records into its output's part file."""
    deadline = time.monotonic() + timeout
    while not [p for p in tmp_path.glob(f".{name}.*.part") if p.stat().st_size]:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"nothing written in {timeout} s: {proc.communicate(timeout=10)}")
        time.sleep(0.05)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_an_interrupted_embedded_solve_stops_at_once_keeps_its_records_and_leaves_no_process(
    sig, slow_corpus, tmp_path
):
    out = tmp_path / "out.jsonl"
    args = ["solve", str(slow_corpus), "-o", str(out), "--workers", "2", "--portfolio", "stochastic"]
    proc = start([*args, "--time-limit", "60"])
    try:
        started_writing(tmp_path, "out.jsonl", proc)
        assert len(session_processes(proc.pid)) == 4  # the command, its two local processes, their board
        sent = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
        assert wait_until_gone(proc.pid) == []
    finally:
        kill_session(proc.pid)
    assert took < 10, f"took {took:.1f} s"  # generous: it kills its processes instead of waiting for them
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err and f"interrupted ({signal.Signals(sig).name})" in err
    records = [json.loads(line) for line in out.read_text().splitlines()]  # whole, valid records
    assert records and len({r["index"] for r in records}) == len(records)
    assert f"interrupted: {len(records)} of " in err and f"written to {out}" in err
    assert not list(tmp_path.glob(".out.jsonl.*"))


ENTRY = ("client/__init__.py", "client/__main__.py", "client/interrupts.py")  # loaded before the handlers


def interpreter_start_up(returncode: int, err: str) -> bool:
    """Whether a signal ended the process before sudoku-batch's entry point ran: before Python's own handler
    (killed outright, no word: a shell shows 130), or in the interpreter's `site` imports or the import of the
    entry module (CPython's traceback, none of its frames in any other module of the repository)."""
    if (returncode, err) == (-signal.SIGINT, ""):
        return True
    files = [f for f in re.findall(r'File "([^"]+)"', err) if f.startswith(str(REPO)) and "/.venv/" not in f]
    return "Traceback" in err and all(f.endswith(ENTRY) for f in files)


@pytest.mark.timeout(180)
def test_ctrl_c_while_the_command_starts_is_one_line_and_exit_130_never_a_traceback():
    """Its first second is imports (numpy, pydantic, numba): a signal there ends it as any interrupt does."""
    ours = []
    for delay in (0.0, 0.05, 0.1, 0.2, 0.3, 0.45, 0.6, 0.8, 1.0):
        proc = start(["solve", "-"], stdin=subprocess.PIPE)  # once started, it waits for stdin
        try:
            time.sleep(delay)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
        finally:
            kill_session(proc.pid)
        if interpreter_start_up(proc.returncode, err):
            continue
        assert proc.returncode == 130 and err == "sudoku-batch: interrupted (SIGINT), exit 130\n", (
            delay,
            err,
        )
        ours.append(delay)
    assert len(ours) >= 5, ours  # past its first tenth of a second it is the command's


@pytest.mark.timeout(180)
def test_a_killed_embedded_solve_takes_its_local_processes_with_it(slow_corpus, tmp_path):
    out = tmp_path / "out.jsonl"
    proc = start(["solve", str(slow_corpus), "-o", str(out), "--workers", "2", "--portfolio", "stochastic"])
    try:
        pool_running(proc)
        proc.kill()
        proc.communicate(timeout=30)
        assert wait_until_gone(proc.pid) == []
    finally:
        kill_session(proc.pid)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_an_interrupted_local_generate_leaves_no_process(sig, tmp_path):
    out = tmp_path / "puzzles.txt"
    args = [
        "generate",
        "--box",
        "4x4",
        "--count",
        "100000",
        "--min-clues",
        "--seed",
        "1",
        "--chunk-size",
        "50",
    ]
    proc = start([*args, "--workers", "2", "-o", str(out)])
    try:
        pool_running(proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        assert wait_until_gone(proc.pid) == []
    finally:
        kill_session(proc.pid)
    assert proc.returncode == (128 + sig if sig != signal.SIGKILL else -sig), err
    assert "Traceback" not in err


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_an_interrupted_broker_solve_prints_the_job_and_the_commands_that_finish_it(workers, tmp_path):
    puzzles = (EASY * 30)[:3000]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(puzzles) + "\n")
    out = tmp_path / "out.jsonl"
    proc = start(["solve", str(path), "--broker", workers, "-o", str(out), "--ordered"])
    try:
        started_writing(tmp_path, "out.jsonl", proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert wait_until_gone(proc.pid) == []
    finally:
        kill_session(proc.pid)
    assert proc.returncode == 130 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    (job,) = {
        ln.split()[1] for ln in lines if ln.startswith("job ") and ln.endswith("goes on without this command")
    }
    try:
        collect = next(ln for ln in lines if ln.startswith("collect it: "))
        assert collect == f"collect it: sudoku-batch collect {job} --broker {workers} -o {out}"
        assert f"or delete it: sudoku-batch purge {job} --broker {workers}" in lines
        for line in lines:  # follow the advice: resume the submission if it stopped, then collect
            if line.startswith("its submission stopped after"):
                resume = line.split(": ", 1)[1].split()
                assert resume[:4] == ["sudoku-batch", "submit", "--resume", job]
                done = subprocess.run(
                    [*cli_command(), *resume[1:]], capture_output=True, text=True, timeout=120
                )
                assert done.returncode == 0, done.stderr
        command = collect.split(": ", 1)[1].split()
        done = subprocess.run(
            [*cli_command(), *command[1:], "--ordered", "-q"], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{done.stderr}\nthe interrupted solve said:\n{err}"
        check_records([json.loads(line) for line in out.read_text().splitlines()], puzzles)
    finally:  # pass or fail, leave the session's redis clean for the tests after
        client = redis.Redis.from_url(workers)
        client.delete(*(client.keys(f"sbatch:job:{job}:*") or [f"sbatch:job:{job}:meta"]))
        client.close()
