"""Hostile messages against a real worker: each is refused in one log line that echoes none of it, nothing
loops, and the worker then still solves a normal job.

One worker (`--concurrency 1`, so messages are handled in order) on a redis-server of this
module; every case sends its message(s) by name, waits for the worker to be done with them,
and reads what the worker logged meanwhile.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import subprocess
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from client.config import ClientSettings
from client.transport import celery_app
from pipeline.contract.generate import GenerateTask
from pipeline.contract.keys import queued
from pipeline.contract.outbox import outbox_entry
from pipeline.contract.tasks import GENERATE_TASK_NAME, MAX_TASK_CHARS, VERSION
from pipeline.contract.tasks import SOLVE_TASK_NAME as TASK_NAME
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
                body,
                content_type="application/x-python-serialize",
                content_encoding="binary",
                headers={"id": "hostile-pickle", "task": TASK_NAME, "lang": "py", "argsrepr": SECRET},
            ),
            exchange=QUEUE,
            routing_key=QUEUE,
        )
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


FAR_AWAY = datetime(2999, 1, 1, tzinfo=UTC)


def due_in_2999(w: Worker) -> tuple[str, str]:
    new_job(w.r, job_id(14))
    send(w, kwargs={"task": ref(job_id(14), input=SECRET)}, eta=FAR_AWAY)
    return "it asks to run later (eta)", ""  # dropped before Celery would hold it until then


def counted_down(w: Worker) -> tuple[str, str]:
    send(w, kwargs={"task": SECRET}, countdown=10**9)  # Celery's sender turns it into an eta
    return "it asks to run later (eta)", ""


def expiring(w: Worker) -> tuple[str, str]:
    send(w, kwargs={"task": SECRET}, expires=3600)
    return "it asks to run later (expires)", ""


def countdown_header(w: Worker) -> tuple[str, str]:
    send(w, kwargs={"task": SECRET}, headers={"countdown": 3600})  # as a hand-made message may put it
    return "it asks to run later (countdown)", ""


def celery_builtin(w: Worker) -> tuple[str, str]:
    send(w, "celery.backend_cleanup")  # known to Celery, ran when a message named it
    return "it names task 'celery.backend_cleanup', which is Celery's", ""


CASES: list[Case] = [
    malformed_kwargs,
    extra_kwargs,
    positional_args,
    ref_to_nothing,
    ref_elsewhere,
    ref_to_garbage,
    ref_to_another_chunk,
    outbox_of_the_wrong_type,
    attempts_of_the_wrong_type,
    pickled,
    raw_pickle_bytes,
    unknown_task,
    huge_generate_count,
    generate_payload_not_a_dict,
    generate_options_not_a_dict,
    huge_solve_runs,
    due_in_2999,
    counted_down,
    expiring,
    countdown_header,
    celery_builtin,
]


def wait_for(w: Worker, offset: int, needle: str, timeout: float = 60.0) -> str:
    """Wait until the worker logged `needle` after `offset`; return what it logged since."""
    deadline, step = time.monotonic() + timeout, 0.005
    while needle not in (text := w.logged_since(offset)):
        assert w.proc.poll() is None, f"the worker died:\n{text[-3000:]}"
        assert time.monotonic() < deadline, f"no {needle!r} in the log:\n{text[-3000:]}"
        time.sleep(step)
        step = min(step * 2, 0.05)
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
    solves_next_message(worker, 0x80 + CASES.index(case))  # one worker, in order: the case is done by then
    text = worker.logged_since(offset)
    assert "Traceback" not in text and SECRET not in text, text
    (line,) = [ln for ln in text.splitlines() if expected in ln]
    assert worker.proc.poll() is None


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_messages_asking_to_run_later_are_acknowledged_at_once_and_never_held_by_the_worker(worker):
    """20,000 messages due in 2999 took the worker's main process from 306 to 396 MB: each was held,
    unacknowledged, until then. Now each is dropped as it arrives: none stays in kombu's unacknowledged
    hash, none is left queued, and the worker runs nothing of them."""
    new_job(worker.r, job_id(15))
    offset = worker.log.stat().st_size
    for i in range(200):
        send(worker, kwargs={"task": ref(job_id(15), chunk=i)}, eta=FAR_AWAY)
    deadline = time.monotonic() + 60
    while (text := worker.logged_since(offset)).count("it asks to run later") < 200:
        assert worker.proc.poll() is None and time.monotonic() < deadline, text[-3000:]
        time.sleep(0.05)
    assert queued(worker.r, QUEUE) == 0 and worker.r.hlen("unacked") == 0
    assert "received" not in text and not worker.r.exists(f"sbatch:job:{job_id(15)}:attempts")
    solves_next_message(worker, 0x30)


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
        capture_output=True,
        text=True,
        timeout=120,
    )
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
    assert tasks.handle(task, fake_redis, GenerateTask) == 0
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


def test_a_delivery_record_redis_refuses_is_logged_in_one_line_and_the_task_goes_on(monkeypatch, caplog):
    requests = pytest.importorskip("worker.requests")
    away = redis.Redis(port=1, socket_connect_timeout=1)  # nothing listens on port 1
    monkeypatch.setattr(requests, "store_client", lambda: away)
    tag, task = SimpleNamespace(delivery_tag="t1"), {"job": job_id(12), "chunk": 3}
    with caplog.at_level("WARNING", "worker.requests"):
        requests.SaneLimitsRequest._record(SimpleNamespace(message=tag, args=[task], kwargs={}))
    lines = [r.getMessage() for r in caplog.records if r.name == "worker.requests"]
    assert len(lines) == 1 and f"{job_id(12)}:3" in lines[0] and "not recorded" in lines[0], lines


def envelope(content: bytes, /, *, task: str = TASK_NAME, **change: Any) -> dict[str, Any]:
    """A kombu envelope as the Redis transport stores it (what `send_task` pushes), `content` base64'd; each
    `change` replaces a field (`headers__id=None` drops the header `id`)."""
    tag = uuid.uuid4().hex
    out: dict[str, Any] = {
        "body": base64.b64encode(content).decode(),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {
            "lang": "py",
            "task": task,
            "id": tag,
            "root_id": tag,
            "parent_id": None,
            "group": None,
            "argsrepr": SECRET,
            "kwargsrepr": SECRET,
            "retries": 0,
            "timelimit": [None, None],
        },
        "properties": {
            "correlation_id": tag,
            "reply_to": tag,
            "delivery_mode": 2,
            "priority": 0,
            "delivery_info": {"exchange": "", "routing_key": QUEUE},
            "body_encoding": "base64",
            "delivery_tag": tag,
        },
    }
    for path, value in change.items():
        *parents, name = path.split("__")
        place = out
        for parent in parents:
            place = place[parent]
        if value is None:
            place.pop(name)
        else:
            place[name] = value
    return out


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


GOOD = body([[], {"task": SECRET}, {}])  # a well-formed body (its task is refused later, by the task)
MALFORMED: dict[str, tuple[Any, str]] = {  # raw message pushed on the queue -> the refusal's words
    "body hello": (envelope(body("hello")), "its body is a str, not [args, kwargs, embed]"),
    "body [1,2]": (envelope(body([1, 2])), "its body is a list of 2"),
    "body {}": (envelope(body({})), "its body is a dict of 0"),
    "body null": (envelope(body(None)), "its body is null"),
    "body 123": (envelope(body(123)), "its body is an int"),
    "body of 4": (envelope(body([[], {}, {}, 1])), "its body is a list of 4"),
    "args not a list": (envelope(body([1, {}, {}])), "its args are an int"),
    "kwargs not a mapping": (envelope(body([[], [SECRET], {}])), "kwargs a list of 1"),
    "embed not a mapping": (envelope(body([[], {}, 1])), "its embed is an int"),
    "callbacks": (envelope(body([[], {}, {"callbacks": [{"task": SECRET}]}])), "asks for callbacks"),
    "task header a list": (envelope(GOOD, task=[SECRET]), "its task header is a list of 1"),  # type: ignore[arg-type]
    "no id header": (envelope(GOOD, headers__id=None), "its id header is null"),
    "stamped headers a number": (envelope(GOOD, headers__stamped_headers=5), "stamped_headers: Input"),
    "shadow a list": (envelope(GOOD, headers__shadow=[SECRET]), "shadow: Input should be a valid string"),
    "callbacks in the headers": (envelope(GOOD, headers__callbacks=[{"task": SECRET}]), "callbacks: Input"),
    "deep body": (envelope(b"[" * 100000 + b"]" * 100000), "cannot be decoded"),
    "not JSON": (SECRET, "not a JSON envelope"),
    "envelope a list": ([SECRET], "not a kombu envelope"),
    "no properties": (envelope(GOOD, properties=None), "properties: Field required"),
    "no delivery tag": (envelope(GOOD, properties__delivery_tag=None), "delivery_tag: Field required"),
    "no delivery info": (envelope(GOOD, properties__delivery_info=None), "delivery_info: Field required"),
    "priority a text": (envelope(GOOD, properties__priority=SECRET), "priority: Input should be"),
    "other body encoding": (envelope(GOOD, properties__body_encoding="rot13"), "body_encoding"),
    "body not base64": (envelope(GOOD, body=SECRET + "!"), "its body is not base64"),
    "headers a text": (envelope(GOOD, headers=SECRET), "headers: Input should be a valid dictionary"),
    "compressed": (envelope(zlib.compress(GOOD), headers__compression="application/x-gzip"), "compressed"),
}


def push(w: Worker, raw: Any) -> None:
    """Put a raw message on the workers' queue, as a credential holder can (LPUSH)."""
    w.r.lpush(QUEUE, raw if isinstance(raw, (str, bytes)) else json.dumps(raw))


def solves_next_message(w: Worker, n: int) -> None:
    """Send a well-formed chunk message of a new job and wait until the worker stored its result."""
    job = job_id(0x40 + n)
    new_job(w.r, job)
    send(w, kwargs={"task": chunk_task(job, EASY[:2]).model_dump(mode="json")})
    deadline, step = time.monotonic() + 60, 0.005
    while not w.r.exists(f"sbatch:job:{job}:part:0:0"):
        assert w.proc.poll() is None, f"the worker died:\n{w.logged_since(0)[-3000:]}"
        assert time.monotonic() < deadline, f"the next message was not solved:\n{w.logged_since(0)[-3000:]}"
        time.sleep(step)
        step = min(step * 2, 0.05)


@pytest.mark.integration
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_message_is_dropped_in_one_line_and_the_same_worker_solves_the_next(worker, name):
    raw, expected = MALFORMED[name]
    pid, offset = worker.proc.pid, worker.log.stat().st_size
    push(worker, raw)
    text = wait_for(worker, offset, expected)
    solves_next_message(worker, list(MALFORMED).index(name))
    text = worker.logged_since(offset)
    assert "Traceback" not in text and "Unrecoverable" not in text and SECRET not in text, text
    (line,) = [ln for ln in text.splitlines() if expected in ln]
    assert "dropping" in line
    assert worker.proc.poll() is None and worker.proc.pid == pid
    assert queued(worker.r, QUEUE) == 0  # dropped, not put back for the next worker


def peak_rss_kb(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM), in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM for process {pid}")


def gzip_bomb(mib: int) -> bytes:
    """`mib` MiB of zeros, gzip-compressed (~1 KB per MiB), made a megabyte at a time."""
    pack, zeros = zlib.compressobj(9, zlib.DEFLATED, 31), bytes(1 << 20)
    return b"".join(pack.compress(zeros) for _ in range(mib)) + pack.flush()


@pytest.mark.integration
@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("kind", "expected"),
    [("a compressed 512 MiB", "compressed ('application/x-gzip')"), ("a 64 MiB", "over 26214400")],
)
def test_a_bomb_or_an_oversized_message_is_refused_before_the_worker_holds_it(worker, kind, expected):
    if kind.startswith("a compressed"):
        raw = envelope(gzip_bomb(512), headers__compression="application/x-gzip")
    else:
        raw = envelope(body([[], {"task": {"job": job_id(12), "chunk": 0, "puzzles": "x" * (48 << 20)}}, {}]))
    children = [
        int(p) for p in Path(f"/proc/{worker.proc.pid}/task/{worker.proc.pid}/children").read_text().split()
    ]
    before = {pid: peak_rss_kb(pid) for pid in [worker.proc.pid, *children]}
    offset = worker.log.stat().st_size
    push(worker, raw)
    del raw
    wait_for(worker, offset, expected)
    solves_next_message(worker, 0x20)
    grown = {pid: peak_rss_kb(pid) - kb for pid, kb in before.items()}
    assert max(grown.values()) < 32 << 10, f"peak memory grew by {grown} kB"  # the message is 48-512 MiB
    assert worker.proc.poll() is None


def test_the_largest_chunk_message_a_sender_makes_is_under_the_workers_message_bound():
    envelope_module = pytest.importorskip("worker.envelope")
    n = MAX_TASK_CHARS // 82  # 9x9 puzzles and their newlines: the most text a chunk task holds
    task = chunk_task(job_id(13), [EASY[0]] * n).model_dump(mode="json")
    raw = json.dumps(envelope(body([[], {"task": task}, {}])))
    assert MAX_TASK_CHARS - 82 < len(task["puzzles"]) <= MAX_TASK_CHARS
    assert len(raw) < envelope_module.MAX_MESSAGE_BYTES
    assert envelope_module.raw_refusal(raw.encode()) is None
    assert envelope_module.envelope_refusal(json.loads(raw)) is None
