"""Hostile messages against a real worker: each is refused in one log line that echoes none of it, nothing
loops, and the worker then still solves a normal job.

One worker (`--concurrency 1`, so messages are handled in order) on a redis-server of this
module; every case sends its message(s) by name, waits for the worker to be done with them,
and reads what the worker logged meanwhile.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from client.config import ClientSettings
from client.transport import celery_app
from pipeline.outbox import outbox_entry
from pipeline.tasks import GENERATE_TASK_NAME, VERSION
from pipeline.tasks import SOLVE_TASK_NAME as TASK_NAME
from tests.conftest import SAMPLE, RedisServer, chunk_task, cli_command, start_workers, stop_all

SECRET = "s3cret-payload-marker"  # put in every hostile message: it must never reach the log
EASY = [ln for ln in SAMPLE.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
QUEUE = "sudoku_batch"


@dataclass
class Worker:
    """The module's redis-server, its worker and its log."""

    url: str
    proc: subprocess.Popen[bytes]
    log: Path
    app: Any
    r: redis.Redis

    def logged_since(self, offset: int) -> str:
        return self.log.read_bytes()[offset:].decode(errors="replace")


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    server = RedisServer(tmp_path_factory.mktemp("hostile-redis"), appendonly=False)
    server.start()
    logs = tmp_path_factory.mktemp("hostile-worker")
    (proc,) = start_workers(server.url, 1, logs)
    app = celery_app(server.url, ClientSettings())
    r = redis.Redis.from_url(server.url)
    try:
        yield Worker(server.url, proc, logs / "worker0.log", app, r)
    finally:
        stop_all([proc])
        app.close()
        r.close()
        server.stop()


def new_job(r: redis.Redis, job: str, **keys: Any) -> None:
    """A job's metadata, as a producer creates it, and any other keys of it as given (name -> value)."""
    r.hset(f"sbatch:job:{job}:meta", mapping={"created": str(time.time()), "state": "producing"})
    for name, value in keys.items():
        key = f"sbatch:job:{job}:{name}"
        if isinstance(value, dict):
            r.hset(key, mapping=value)
        elif isinstance(value, list):
            r.rpush(key, *value)
        else:
            r.set(key, value)


def send(w: Worker, name: str = TASK_NAME, **options: Any) -> str:
    """Send a task message by name to the workers' queue; return its id."""
    return w.app.send_task(name, queue=QUEUE, **options).id


def ref(job: str, chunk: int = 0, **extra: Any) -> dict[str, Any]:
    return {"v": VERSION, "job": job, "chunk": chunk, "ref": "outbox", **extra}


def job_id(n: int) -> str:
    return f"{n:02x}" * 16


Case = Callable[
    [Worker], tuple[str, str]
]  # sends its messages; returns (the line expected, the task id or "")


def malformed_kwargs(w: Worker) -> tuple[str, str]:
    return "dropping a malformed chunk message", send(w, kwargs={"task": SECRET})


def extra_kwargs(w: Worker) -> tuple[str, str]:
    task = send(w, kwargs={"task": ref(job_id(1)), SECRET: SECRET})
    return "expected one argument, task", task


def positional_args(w: Worker) -> tuple[str, str]:
    return "expected one argument, task", send(w, args=[SECRET, SECRET])


def ref_to_nothing(w: Worker) -> tuple[str, str]:
    new_job(w.r, job_id(2))
    return "neither in the outbox nor answered", send(w, kwargs={"task": ref(job_id(2), 7)})


def ref_elsewhere(w: Worker) -> tuple[str, str]:
    return "dropping a malformed chunk message", send(w, kwargs={"task": ref("../../" + SECRET, ref="x")})


def ref_to_garbage(w: Worker) -> tuple[str, str]:
    new_job(w.r, job_id(3), outbox={"0": SECRET * 3})
    return "outbox entry is malformed", send(w, kwargs={"task": ref(job_id(3))})


def ref_to_another_chunk(w: Worker) -> tuple[str, str]:
    other = chunk_task(job_id(4), [EASY[0]], chunk=5).model_copy(update={"input": SECRET})
    new_job(w.r, job_id(4), outbox={"0": outbox_entry(time.time(), other.model_dump_json())})
    return "outbox entry is malformed", send(w, kwargs={"task": ref(job_id(4))})


def outbox_of_the_wrong_type(w: Worker) -> tuple[str, str]:
    new_job(w.r, job_id(5), outbox=SECRET)
    return "job keys are not the pipeline's", send(w, kwargs={"task": ref(job_id(5))})


def attempts_of_the_wrong_type(w: Worker) -> tuple[str, str]:
    new_job(w.r, job_id(6), attempts=[SECRET])
    return "job keys are not the pipeline's", send(w, kwargs={"task": ref(job_id(6))})


def pickled(w: Worker) -> tuple[str, str]:
    send(w, kwargs={"task": ref(job_id(7), input=SECRET)}, serializer="pickle")
    return "Refusing to deserialize untrusted content of type pickle", ""  # refused before any task runs


def raw_pickle_bytes(w: Worker) -> tuple[str, str]:
    """A pickle body whose unpickling would run code: kombu must refuse it before decoding."""
    body = pickle.dumps(((), {"task": SECRET}, {}))
    with w.app.connection_for_write() as conn:
        conn.default_channel.basic_publish(
            conn.default_channel.prepare_message(
                body, content_type="application/x-python-serialize", content_encoding="binary",
                headers={"id": "hostile-pickle", "task": TASK_NAME, "lang": "py", "argsrepr": SECRET},
            ),
            exchange=QUEUE, routing_key=QUEUE,
        )  # fmt: skip
    return "Refusing to deserialize untrusted content of type pickle", ""


def unknown_task(w: Worker) -> tuple[str, str]:
    send(w, "sudoku_batch.no_such_task", kwargs={"task": SECRET})
    return "dropping a message for an unknown task 'sudoku_batch.no_such_task'", ""


def huge_generate_count(w: Worker) -> tuple[str, str]:
    new_job(w.r, job_id(8))
    task = {"job": job_id(8), "chunk": 0, "box": "3x3", "count": 10**9, "seed": 1, "options": {}}
    return "malformed generate message", send(w, GENERATE_TASK_NAME, kwargs={"task": task})


def generate_payload_not_a_dict(w: Worker) -> tuple[str, str]:
    return "dropping a malformed generate message", send(w, GENERATE_TASK_NAME, kwargs={"task": [SECRET]})


def generate_options_not_a_dict(w: Worker) -> tuple[str, str]:
    task = {"job": job_id(9), "chunk": 0, "box": "2x2", "count": 3, "seed": 1, "options": SECRET}
    return "malformed generate message", send(w, GENERATE_TASK_NAME, kwargs={"task": task})


def huge_solve_runs(w: Worker) -> tuple[str, str]:
    task = chunk_task(job_id(10), EASY[:2]).model_dump(mode="json")
    task |= {"index_runs": [[0, 10**12]], "line_runs": [[1, 10**12]], "input": SECRET}
    return "dropping a malformed chunk message", send(w, kwargs={"task": task})


CASES: list[Case] = [
    malformed_kwargs, extra_kwargs, positional_args, ref_to_nothing, ref_elsewhere, ref_to_garbage,
    ref_to_another_chunk, outbox_of_the_wrong_type, attempts_of_the_wrong_type, pickled, raw_pickle_bytes,
    unknown_task, huge_generate_count, generate_payload_not_a_dict, generate_options_not_a_dict,
    huge_solve_runs,
]  # fmt: skip


def wait_for(w: Worker, offset: int, needle: str, timeout: float = 60.0) -> str:
    """Wait until the worker logged `needle` after `offset`; return what it logged since."""
    deadline = time.monotonic() + timeout
    while needle not in (text := w.logged_since(offset)):
        assert w.proc.poll() is None, f"the worker died:\n{text[-3000:]}"
        assert time.monotonic() < deadline, f"no {needle!r} in the log:\n{text[-3000:]}"
        time.sleep(0.05)
    return text


@pytest.mark.integration
@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_a_hostile_message_is_refused_in_one_log_line_without_its_payload(worker, case):
    offset = worker.log.stat().st_size
    expected, task = case(worker)
    text = wait_for(worker, offset, expected)
    if task:
        text = wait_for(
            worker, offset, f"[{task}] succeeded"
        )  # handled to its end: acknowledged, not redelivered
    time.sleep(0.3)
    text = worker.logged_since(offset)
    assert "Traceback" not in text and SECRET not in text, text
    (line,) = [ln for ln in text.splitlines() if expected in ln]
    assert worker.proc.poll() is None


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_negative_time_limits_in_a_message_are_ignored_and_the_chunk_is_answered_once(worker, tmp_path):
    nobody = {**os.environ, "SUDOKU_BATCH_QUEUE": "sbatch-nobody"}  # the job and its outbox, no message
    submitted = subprocess.run(
        [*cli_command(), "submit", str(SAMPLE), "--broker", worker.url],
        capture_output=True,
        text=True,
        env=nobody,
    )
    job = submitted.stdout.strip()
    offset = worker.log.stat().st_size
    task = send(worker, kwargs={"task": ref(job)}, soft_time_limit=-1, time_limit=-1)
    text = wait_for(worker, offset, f"[{task}] succeeded")
    assert "asked for time limits" in text and "Traceback" not in text, text
    assert "Hard time limit" not in text and "WorkerLostError" not in text, text
    assert worker.r.lrange(f"sbatch:job:{job}:arrivals", 0, -1) == [b"0:0"]
    assert int(worker.r.hget(f"sbatch:job:{job}:attempts", 0)) == 1


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_after_every_hostile_message_the_worker_still_solves_a_normal_job(worker, tmp_path):
    out = tmp_path / "out.jsonl"
    done = subprocess.run(
        [*cli_command(), "solve", str(SAMPLE), "--broker", worker.url, "-o", str(out), "-q"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == len(EASY) and {r["status"] for r in records} == {"solved"}
    assert worker.proc.poll() is None


def test_a_generate_message_asking_for_a_billion_puzzles_is_answered_with_an_error_at_once(fake_redis):
    tasks = pytest.importorskip("worker.tasks")
    job = job_id(11)
    new_job(fake_redis, job)
    task = {"job": job, "chunk": 0, "box": "3x3", "count": 10**9, "seed": 1, "options": {}}
    start = time.process_time()
    assert tasks.handle_generate(task, fake_redis) == 0
    assert time.process_time() - start < 5  # generous: nothing is generated
    body = json.loads(fake_redis.get(f"sbatch:job:{job}:result:0"))
    assert body["n"] == 0 and "count" in body["error"] and "131072" in body["error"]


@pytest.mark.parametrize(
    ("asked", "kept"),
    [((-1, -1), (None, None)), ((0, 0), (None, None)), ((float("nan"), 5), (None, None)),
     ((600, 570), (600.0, 570.0)), ((10**9, "x"), (None, None)), ((True, None), (None, None))],
)  # fmt: skip
def test_time_limits_a_message_asks_for_are_kept_only_within_the_sane_range(asked, kept):
    requests = pytest.importorskip("worker.requests")
    assert tuple(requests.sane_limit(v) for v in asked) == kept
