"""The command line's edges (issue 22): job ids checked before the broker is touched, inputs of
nothing but blank lines, a FIFO nobody reads, a closed stdout, a status of a stopped producer and
help texts that state every default."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import time

import pytest

from tests.conftest import SAMPLE, cli_command, url_of

FORM = "job ids are 8 to 64 hex digits, as `submit` prints them"
LINES = [ln for ln in SAMPLE.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "SUDOKU_BATCH_BROKER"}
    return subprocess.run(
        [*cli_command(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**full, **(env or {})},
        input=stdin,
    )


def run_in_process(capsys, monkeypatch, *args: str) -> subprocess.CompletedProcess[str]:  # noqa: ANN001
    """`sudoku-batch ARGS` run by `client.cli.main` in this process (the command's own path, without the
    second of a new interpreter's imports): its exit code and output. One real process per class of
    behaviour stays (the resume and status tests below)."""
    from client.cli import main

    monkeypatch.delenv("SUDOKU_BATCH_BROKER", raising=False)
    capsys.readouterr()
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, out, err)


@pytest.mark.integration
@pytest.mark.parametrize("job", ["*", "", "sbatch:workers", "../x", "abc", "g" * 32])
@pytest.mark.parametrize("command", ["purge", "status", "collect"])
def test_a_job_id_of_the_wrong_form_is_a_usage_error_that_touches_no_key(
    command, job, redis_client, capsys, monkeypatch
):
    proc = run_in_process(capsys, monkeypatch, command, job, "--broker", url_of(redis_client))
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line == f"sudoku-batch: error: {job!r} is not a job id: {FORM}"
    assert redis_client.keys("*") == []


def test_a_resume_of_a_job_id_of_the_wrong_form_is_a_usage_error():
    proc = run_cli("submit", "--resume", "*", str(SAMPLE), "--broker", "redis://127.0.0.1:1/0")
    assert proc.returncode == 2 and "'*' is not a job id" in proc.stderr, proc.stderr


@pytest.mark.integration
def test_status_of_a_job_that_is_not_there_names_the_id(redis_client):
    job = "0123abcd" * 4
    proc = run_cli("status", job, "--broker", url_of(redis_client))
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"sudoku-batch: error: no such job {job} (never created, purged or expired)"


def _newlines_gz(path, megabytes: int, tail: bytes = b"") -> None:
    with gzip.open(path, "wb", compresslevel=1) as f:
        block = b"\n" * (1 << 20)
        for _ in range(megabytes):
            f.write(block)
        f.write(tail)


def test_a_gzip_of_hundreds_of_megabytes_of_newlines_is_read_to_its_last_puzzle(tmp_path):
    """The producer beats while it reads lines that hold no puzzle: no collector takes it for dead."""
    path = tmp_path / "blank.txt.gz"
    _newlines_gz(path, 200, LINES[0].encode() + b"\n")
    proc = run_cli("solve", str(path), env={"SUDOKU_BATCH_PRODUCER_STALE_S": "3"})
    assert proc.returncode == 0, proc.stderr
    (record,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert record["status"] == "solved" and record["line"] == 200 * (1 << 20) + 1
    assert "producer stopped" not in proc.stderr


def test_an_input_of_blank_lines_only_says_it_holds_no_puzzle(tmp_path):
    path = tmp_path / "blank.txt.gz"
    _newlines_gz(path, 50)
    proc = run_cli("solve", str(path), env={"SUDOKU_BATCH_PRODUCER_STALE_S": "3"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert "0 puzzles in" in proc.stderr
    assert "the input holds no puzzle: its lines are all blank or # comments" in proc.stderr


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_an_interrupted_submit_prints_the_resume_command_that_works_at_once(redis_client, tmp_path):
    url = url_of(redis_client)
    path = tmp_path / "corpus.txt"
    puzzles = (LINES * 700)[:200_000]
    path.write_text("\n".join(puzzles) + "\n")
    env = {**os.environ, "SUDOKU_BATCH_MAX_CHUNK_BYTES": str(83 * 100)}
    env.pop("SUDOKU_BATCH_BROKER", None)
    proc = subprocess.Popen(
        [*cli_command(), "submit", str(path), "--broker", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    job = proc.stdout.readline().strip()
    meta = f"sbatch:job:{job}:meta"
    deadline = time.monotonic() + 60
    while json.loads(redis_client.hget(meta, "checkpoint") or "{}").get("index", 0) < 1000:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    stopped = next(ln for ln in err.splitlines() if ln.startswith("its submission stopped after"))
    assert stopped.endswith(f": sudoku-batch submit --resume {job} {path} --broker {url}"), err
    status = run_cli("status", job, "--broker", url)
    assert "its producer stopped; resume it:" in status.stdout and "silent for" not in status.stdout
    resumed = subprocess.run(
        [*cli_command(), *stopped.split(": ", 1)[1].split()[1:]],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert redis_client.hget(meta, "total") == str(len(puzzles)).encode()


def _read_one_line_then_close(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run the command with stdout to a pipe, read its first line, close the pipe (as `| head -1`)."""
    full = {k: v for k, v in os.environ.items() if k != "SUDOKU_BATCH_BROKER"}
    proc = subprocess.Popen(
        [*cli_command(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**full, **(env or {})}
    )
    first = proc.stdout.readline().decode()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=120), first, err


@pytest.mark.parametrize(
    "args",
    [
        ["solve", str(SAMPLE), "--workers", "1"],
        ["generate", "--box", "3x3", "--count", "20000", "--seed", "1", "--full"],
        ["generate", "--box", "2x2", "--count", "20000", "--seed", "1"],
    ],
    ids=["solve", "generate full", "generate"],
)
def test_a_closed_stdout_ends_the_command_quietly_with_exit_141(args, tmp_path):
    code, first, err = _read_one_line_then_close([*args, "-q"])
    assert first.strip() and (code, err) == (141, ""), err


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_broker_solve_whose_stdout_closes_cancels_and_purges_its_job(workers, tmp_path):
    import redis

    path = tmp_path / "corpus.txt"
    path.write_text("\n".join((LINES * 20)[:3000]) + "\n")
    client = redis.Redis.from_url(workers)
    before = set(client.keys("sbatch:job:*"))
    code, first, err = _read_one_line_then_close(["solve", str(path), "--broker", workers, "-q"])
    assert json.loads(first)["status"] == "solved" and (code, err) == (141, ""), err
    left = {k for k in set(client.keys("sbatch:job:*")) - before if not k.endswith(b":stop")}
    client.close()
    assert left == set()


STUCK = "12345678." + "........9" + "." * 63  # no solution; stochastic solvers cannot prove it: they go on


@pytest.mark.timeout(120)
def test_solve_gives_a_puzzle_20_seconds_by_default_and_says_so(tmp_path):
    path = tmp_path / "stuck.txt"
    path.write_text(STUCK + "\n")
    started = time.monotonic()
    proc = run_cli("solve", str(path), "--portfolio", "stochastic", timeout=90)
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    (record,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert record["status"] in ("approximate", "timeout") and 19 <= record["time_ms"] / 1000 <= 40
    assert "; time limit 20 s per puzzle" in proc.stderr.splitlines()[0] and took < 80


@pytest.mark.parametrize("value", ["0", "none", "NONE"])
def test_a_time_limit_of_0_or_none_is_no_limit_and_the_summary_says_so(value, tmp_path):
    proc = run_cli("solve", str(SAMPLE), "--time-limit", value, "-o", str(tmp_path / "o.jsonl"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[0].endswith(": solved 306; no time limit")


def test_batch_client_jobs_get_the_default_time_limit_unless_none_is_asked():
    from client.batch import BatchClient

    with BatchClient(workers=1) as client:
        default = client.submit(LINES[:2])
        none = client.submit(LINES[:2], time_limit=None)
        zero = client.submit(LINES[:2], time_limit=0)
        five = client.submit(LINES[:2], time_limit=5)
        limits = [client.store.meta(job.id).get("time_limit") for job in (default, none, zero, five)]
        for job in (default, none, zero, five):
            assert [r.status for r in job.results()] == ["solved", "solved"]
    assert limits == ["20.0", None, None, "5"]


def _value_options() -> list[tuple[str, str, str]]:
    import argparse

    from client.cli import parser

    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return [
        (command, action.option_strings[-1], action.help or "")
        for command, p in sub.choices.items()
        for action in p._actions
        if action.option_strings and action.nargs != 0 and not action.required  # not flags, not --count
    ]


def test_every_option_that_takes_a_value_states_its_default_in_help():
    options = _value_options()
    assert len(options) > 40
    missing = [f"{command} {flag}: {text!r}" for command, flag, text in options if "default" not in text]
    assert missing == []


@pytest.mark.parametrize("args", [["health"], ["worker", "--concurrency", "100000"]])
def test_worker_and_health_say_when_they_fall_back_to_the_local_redis(args):
    proc = run_cli(*args, timeout=60)
    assert proc.returncode in (1, 2), proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first == "no --broker and no SUDOKU_BATCH_BROKER: using redis://127.0.0.1:6379/0"


def test_the_monitoring_doc_says_flower_2_needs_auth_or_an_open_api_for_its_tasks():
    from tests.conftest import REPO

    text = (REPO / "docs" / "monitoring.md").read_text()
    assert "FLOWER_UNAUTHENTICATED_API=true" in text and "/api/tasks" in text


@pytest.mark.parametrize(
    ("command", "variable", "value"),
    [
        (["jobs"], "SUDOKU_BATCH_POLL_INTERVAL", "-1"),
        (["solve", str(SAMPLE), "-o", "-"], "SUDOKU_BATCH_CHUNK_SECONDS", "1e99"),
        (["worker"], "SUDOKU_BATCH_HEARTBEAT_S", "-7.5"),
        (["worker"], "SUDOKU_BATCH_MAX_ATTEMPTS", "100000"),
    ],
)
def test_a_setting_out_of_bounds_in_the_environment_ends_the_command_in_one_line_naming_it(
    redis_url, command, variable, value
):
    done = subprocess.run(
        [*cli_command(), *command, "--broker", redis_url],
        env={**os.environ, variable: value},
        capture_output=True,
        text=True,
        timeout=120,
    )
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert done.returncode in (1, 2) and len(errors) == 1, done.stderr
    assert variable in errors[0] and value not in errors[0] and "Traceback" not in done.stderr
