"""Limits on what one message or one line may make a worker or the producer hold.

A hand-crafted task message cannot make a worker allocate unbounded memory: sizes and
counts are checked by `ChunkTask` before anything is expanded, and the worker drops
such a message with one log line. The producer never builds a message over the limits.
"""

from __future__ import annotations

import io
import json

import pytest
from pydantic import ValidationError

from client.config import ClientSettings
from client.pending import ChunkSizer
from pipeline.contract.tasks import MAX_CHUNK_PUZZLES, MAX_NAME_CHARS, MAX_TASK_CHARS, ChunkTask
from pipeline.engine.reader import read_blocks
from solvers.model.parse import MAX_LINE_CHARS
from tests.conftest import SAMPLE

LINES = SAMPLE.read_text().splitlines()
JOB = "0c" * 16


def message(**changes: object) -> dict:
    """A valid two-puzzle task message with some fields replaced."""
    base = {
        "job": JOB,
        "chunk": 0,
        "input": "in.txt",
        "index_runs": [[0, 2]],
        "line_runs": [[1, 2]],
        "puzzles": LINES[0] + "\n" + LINES[1],
    }
    return {**base, **changes}


def test_a_well_formed_message_is_accepted():
    assert len(ChunkTask.model_validate(message())) == 2


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("index_runs", [[0, 10**12]]),  # would expand to a trillion indices
        ("line_runs", [[1, 10**12]]),
        ("index_runs", [[0, 1]] * (MAX_CHUNK_PUZZLES + 1)),
        ("index_runs", [[0, -5], [0, 7]]),
        ("index_runs", [[-1, 2]]),
        ("line_runs", [[0, 2]]),
        ("puzzles", LINES[0]),  # one line for two puzzles
        ("puzzles", "x" * (MAX_TASK_CHARS + 1)),
        ("spans", [1, 10**9]),
        ("spans", [1]),
        ("input", "x" * (MAX_NAME_CHARS + 1)),
        ("portfolio", "y" * (MAX_NAME_CHARS + 1)),
        ("time_limit", 1e300),
        ("chunk", 2**64),
        ("seed", -1),
        ("job", "../../etc/passwd"),
        ("extra", "field"),
    ],
)
def test_a_message_over_a_limit_or_inconsistent_is_refused_before_anything_is_allocated(field, value):
    with pytest.raises(ValidationError):
        ChunkTask.model_validate(message(**{field: value}))


def test_a_message_of_too_many_puzzles_is_refused_even_when_consistent():
    n = MAX_CHUNK_PUZZLES + 1
    with pytest.raises(ValidationError, match="at most"):
        ChunkTask.model_validate(
            message(index_runs=[[0, n]], line_runs=[[1, n]], puzzles="\n".join(["1"] * n))
        )


def test_the_worker_drops_an_oversized_message_and_stores_nothing(fake_redis):
    tasks = pytest.importorskip("worker.tasks")
    fake_redis.hset(f"sbatch:job:{JOB}:meta", "created", "1")
    assert tasks.solve_chunk_task.run(message(index_runs=[[0, 10**12]], line_runs=[[1, 10**12]])) == 0
    assert fake_redis.keys(f"sbatch:job:{JOB}:part*") == []


@pytest.mark.parametrize("text_len", [17, 82, 257, 626, 1297, 4097])
def test_the_producer_never_builds_a_chunk_over_the_workers_limits(text_len):
    sizer = ChunkSizer(target_s=1e9, max_bytes=ClientSettings().max_chunk_bytes)
    for _ in range(40):
        size = sizer.next(text_len, per_puzzle_s=1e-9)
    assert size <= MAX_CHUNK_PUZZLES and size * (text_len + 1) <= MAX_TASK_CHARS
    assert size == min(MAX_CHUNK_PUZZLES, ClientSettings().max_chunk_bytes // (text_len + 1))


def test_the_producer_refuses_a_chunk_byte_setting_above_what_workers_accept(monkeypatch):
    monkeypatch.setenv("SUDOKU_BATCH_MAX_CHUNK_BYTES", str(MAX_TASK_CHARS + 1))
    with pytest.raises(ValidationError):
        ClientSettings()


def test_an_over_long_line_is_invalid_and_only_its_head_is_kept():
    huge = b"1" * (MAX_LINE_CHARS * 3)
    data = LINES[0].encode() + b"\n" + huge + b"\n" + LINES[1].encode() + b"\n"
    blocks = list(read_blocks(io.BytesIO(data), None))
    texts = [t for b in blocks for t in b.texts]
    errors = [e for b in blocks for e in b.errors] if any(not b.all_valid for b in blocks) else []
    assert texts[0] == LINES[0] and texts[2] == LINES[1]
    assert len(texts[1]) <= 200 and "longer than" in str(errors[1])
    assert max(len(t) for t in texts) < MAX_LINE_CHARS


def test_a_65x65_grid_is_refused_with_the_supported_size_named():
    from solvers.api import solve_many

    (result,) = solve_many(["." * (65 * 65)])
    assert result.status.value == "invalid" and "64" in result.error


def test_the_json_message_the_producer_sends_round_trips_through_the_limits():
    task = ChunkTask.model_validate(message())
    assert ChunkTask.model_validate(json.loads(json.dumps(task.model_dump(mode="json")))) == task


# Security: credentials, TLS URLs, and the message format the workers accept.


def test_passwords_and_acl_users_are_masked_wherever_a_url_is_printed():
    from client.config import mask_url

    assert mask_url("redis://:s3cret@h:6379/0") == "redis://:****@h:6379/0"
    assert mask_url("rediss://worker:s3cret@h:6380/1") == "rediss://worker:****@h:6380/1"
    assert mask_url("cannot reach redis://s3cret@h/0 now") == "cannot reach redis://****@h/0 now"
    assert "s3cret" not in mask_url("a redis://u:s3cret@a/0 and rediss://:s3cret@b/0")


def test_rediss_urls_are_accepted_and_verify_the_server_certificate():
    import ssl

    from client.cli import main
    from client.config import check_broker_url
    from client.transport import celery_app

    check_broker_url("rediss://worker:pw@redis.example:6380/0")
    app = celery_app("rediss://worker:pw@redis.example:6380/0", ClientSettings())
    assert app.conf.broker_use_ssl == {"ssl_cert_reqs": ssl.CERT_REQUIRED}
    assert main(["status", "0" * 32, "--broker", "http://redis.example/0"]) == 2


def test_workers_accept_json_only():
    pytest.importorskip("worker.tasks")
    from worker.app import app

    assert app.conf.accept_content == ["json"] and app.conf.task_serializer == "json"


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_an_acl_user_with_a_password_works_end_to_end_and_the_password_is_never_printed(tmp_path):
    import os
    import subprocess

    import redis
    from kombu import Connection

    from tests.conftest import RedisServer, check_records, cli_command, start_workers, stop_all

    secret = "Zq7-not-in-any-log-9xP"
    (tmp_path / "users.acl").write_text(f"user worker on >{secret} ~* &* +@all\nuser default off\n")
    acl = ["--aclfile", str(tmp_path / "users.acl")]
    server = RedisServer(tmp_path)  # for its binary and a free port; started below with the ACL
    url = f"redis://worker:{secret}@127.0.0.1:{server.port}/0"
    import time

    proc_server = None
    try:
        cmd = [
            server.server,
            "--port",
            str(server.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            str(tmp_path),
        ]
        proc_server = subprocess.Popen([*cmd, *acl], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(url, socket_connect_timeout=0.5).ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=server.port).ping()  # no anonymous access
        logs = tmp_path / "logs"
        logs.mkdir()
        workers = start_workers(url, 1, logs)
        try:
            with Connection(url) as conn:  # a pickled message must be refused, not run
                conn.SimpleQueue("sudoku_batch").put(
                    {"task": "x"},
                    serializer="pickle",
                    headers={"task": "sudoku_batch.solve_chunk", "id": "1"},
                )
            corpus = tmp_path / "in.txt"
            corpus.write_text("\n".join(LINES[:50]) + "\n")
            out = tmp_path / "out.jsonl"
            env = dict(os.environ)
            run = subprocess.run(
                [*cli_command(), "solve", str(corpus), "--broker", url, "-o", str(out)],
                capture_output=True,
                text=True,
                timeout=90,
                env=env,
            )
            assert run.returncode == 0, run.stderr
            check_records([json.loads(x) for x in out.read_text().splitlines()], LINES[:50])
            bad = subprocess.run(
                [*cli_command(), "status", "0" * 32, "--broker", url.replace(secret, secret + "x")],
                capture_output=True,
                text=True,
                timeout=60,
                env=env,
            )
            assert bad.returncode == 1 and "****" in bad.stderr
        finally:
            stop_all(workers)
        printed = run.stdout + run.stderr + bad.stderr + (logs / "worker0.log").read_text(errors="replace")
        assert secret not in printed
        assert "Refusing to deserialize untrusted content of type pickle" in printed
    finally:
        if proc_server is not None:
            proc_server.terminate()
            proc_server.wait(10)


def test_a_refused_message_is_logged_in_one_line_without_its_payload(fake_redis, caplog):
    tasks = pytest.importorskip("worker.tasks")
    payload = message(index_runs=[[0, 10**12]], line_runs=[[1, 10**12]], input="s3cret-name" * 10)
    with caplog.at_level("ERROR", logger="worker.tasks"):
        assert tasks.solve_chunk_task.run(payload) == 0
    (record,) = [r for r in caplog.records if "malformed" in r.getMessage()]
    text = record.getMessage()
    assert "\n" not in text and "at most" in text and LINES[0] not in text
