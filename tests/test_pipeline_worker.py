"""The Celery adapter: JSON-only settings, and a task body that stores one answer per chunk (fakeredis)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from client.collector import stream_chunks
from client.config import ClientSettings
from client.redis_store import RedisJobStore
from client.store import Checkpoint
from pipeline.contract.keys import JobKeys
from pipeline.contract.part import Part
from pipeline.contract.tasks import SOLVE_TASK_NAME as TASK_NAME
from tests.conftest import CORPORA, SAMPLE, chunk_task, corpus_file

LINES = SAMPLE.read_text().splitlines()
JOB = "0a" * 16


@pytest.fixture
def worker_tasks():
    return pytest.importorskip("worker.tasks")


@pytest.fixture
def worker_board():
    return pytest.importorskip("worker.board")


def payload(texts: list[str], chunk: int, first: int) -> dict:
    task = chunk_task(JOB, texts, chunk=chunk, first=first)
    return json.loads(json.dumps(task.model_dump(mode="json")))  # exactly what a JSON message carries


def new_job(fake_redis) -> RedisJobStore:
    store = RedisJobStore(fake_redis, ClientSettings())
    store.create(JOB, {"created": str(time.time()), "state": "producing"})
    return store


def test_the_app_accepts_json_only_acks_late_and_prefetches_one(worker_tasks):
    from worker.app import app

    conf = app.conf
    assert conf.accept_content == ["json"] and conf.task_serializer == "json"
    assert conf.task_acks_late and conf.task_reject_on_worker_lost and conf.worker_prefetch_multiplier == 1
    assert conf.task_ignore_result and conf.broker_transport_options["visibility_timeout"] >= 3600
    assert conf.task_time_limit > conf.task_soft_time_limit
    assert TASK_NAME in app.tasks


def test_a_redelivered_chunk_answers_no_puzzle_twice(fake_redis, worker_tasks):
    store = new_job(fake_redis)
    message = payload(LINES[:20], 0, 0)
    assert worker_tasks.handle(message, fake_redis) == 20
    assert worker_tasks.handle(message, fake_redis) == 0  # the worker died before its ack: nothing left
    assert worker_tasks.handle(payload(LINES[20:25], 1, 20), fake_redis) == 5
    store.update(JOB, {"state": "produced", "total": "25", "chunks_total": "2"})
    chunks = list(stream_chunks(store, JOB, result_ttl=60, poll=0.01))
    records = [json.loads(line) for c in chunks for line in c.lines()]
    assert sorted(r["index"] for r in records) == list(range(25))
    assert store.status(JOB).counts == {"solved": 25}


def test_a_chunk_of_a_purged_job_is_dropped_without_solving(fake_redis, worker_tasks):
    assert worker_tasks.handle(payload(LINES[:3], 0, 0), fake_redis) == 0
    assert fake_redis.keys("*") == []


def test_a_chunk_that_keeps_killing_its_worker_is_answered_with_errors(fake_redis, worker_tasks):
    store = new_job(fake_redis)
    fake_redis.hset(JobKeys(JOB).attempts, 0, worker_tasks.settings.max_attempts)
    worker_tasks.handle(payload(LINES[:4], 0, 0), fake_redis)
    (result,) = [c for c in [store.fetch(JOB, [(0, 0)])[0]] if c]
    records = [json.loads(line) for line in Part.decode(result).lines()]
    assert [r["status"] for r in records] == ["error"] * 4 and "worker crash" in records[0]["error"]


FRISCH = CORPORA / "25x25" / "gecode_frisch_25x25.txt"


def test_a_chunk_published_in_parts_whose_worker_dies_between_parts_gives_one_record_per_line(
    fake_redis, worker_tasks, worker_board, monkeypatch
):
    corpus_file("25x25/gecode_frisch_25x25.txt")  # a 25x25 grid the first pass leaves to the race
    store = new_job(fake_redis)
    texts = LINES[:5] + FRISCH.read_text().splitlines()[:1] + LINES[5:10]
    task = chunk_task(JOB, texts, portfolio="race", time_limit=1.0, format="jsonl")
    message = json.loads(json.dumps(task.model_dump(mode="json")))
    publish, published = worker_board.publish_part, []

    def dies_after_the_first_pass(client, part, ttl, cost):
        if len(published) == 1:  # the first pass is out (one part: rows 0-4 and 6-10); row 5 is being raced
            raise SystemExit("killed between parts")
        published.append(part.part)
        return publish(client, part, ttl, cost)

    monkeypatch.setattr(worker_board, "publish_part", dies_after_the_first_pass)
    with pytest.raises(SystemExit):
        worker_tasks.handle(message, fake_redis)
    assert published == [(0, 0)]
    monkeypatch.setattr(worker_board, "publish_part", publish)
    assert worker_tasks.handle(message, fake_redis) == 1  # the redelivery solves the one row left
    assert worker_tasks.handle(message, fake_redis) == 0  # and a third delivery nothing
    store.update(JOB, {"state": "produced", "total": "11", "chunks_total": "1"})
    parts = list(stream_chunks(store, JOB, result_ttl=60, poll=0.01))
    assert sorted(p.part for p in parts) == [(0, 0), (0, 5)]
    records = [json.loads(line) for p in parts for line in p.lines()]
    assert sorted(r["index"] for r in records) == list(range(11))
    assert store.status(JOB).done == 11 and store.status(JOB).chunks_done == 1


def test_workers_announce_themselves_for_status(fake_redis, worker_tasks):
    from worker.heartbeat import beat

    beat(fake_redis, "host:42")
    assert RedisJobStore(fake_redis, ClientSettings()).live_workers() == ["host:42"]


class FakeBroker:
    """What the orphan sweep meets of the broker: kombu's QoS (its unacknowledged hash, `restore_by_tag`)
    and the app's `send_task`, each call recorded."""

    def __init__(self) -> None:
        from types import SimpleNamespace

        self.restored: list[tuple[str, bool]] = []
        self.sent: list[tuple[str, dict]] = []
        qos = SimpleNamespace(
            unacked_key="unacked",
            restore_by_tag=lambda tag, leftmost=False: self.restored.append((tag, leftmost)),
        )
        self.connection = SimpleNamespace(default_channel=SimpleNamespace(qos=qos))

    def connection_for_write(self):
        from contextlib import nullcontext

        return nullcontext(self.connection)

    def send_task(self, name: str, kwargs: dict, queue: str, priority: int) -> None:
        assert 0 <= priority <= 9  # a chunk sent again goes to one of the queue's priority lists
        self.sent.append((name, kwargs["task"]))


def test_the_orphan_sweep_requeues_only_old_deliveries_no_live_worker_is_solving(fake_redis, worker_tasks):
    from pipeline.contract.keys import current_key, deliveries_key
    from worker.heartbeat import beat, chunk_of, record_delivery, restore_orphans

    store = new_job(fake_redis)
    now = time.time()
    record_delivery(fake_redis, "old", chunk_of({"job": JOB, "chunk": 0, "ref": "outbox"}), now - 120)
    record_delivery(fake_redis, "running", f"{JOB}:1", now - 120)  # its worker is alive and solving it
    record_delivery(fake_redis, "young", f"{JOB}:2", now - 1)
    record_delivery(fake_redis, "answered", f"{JOB}:3", now - 120)
    fake_redis.hset("unacked", mapping={tag: '[{}, "", "q"]' for tag in ("old", "running", "young")})
    worker_tasks.handle(payload(LINES[:2], 3, 0), fake_redis)  # its result write drops the record
    assert store.fetch(JOB, [(3, 0)]) != [None]
    beat(fake_redis, "host:7")
    fake_redis.hset(current_key(), "host:7", f"{JOB}:1")
    broker = FakeBroker()
    assert restore_orphans(fake_redis, broker) == 1 and broker.restored == [("old", True)] and not broker.sent
    assert sorted(fake_redis.hkeys(deliveries_key())) == [f"{JOB}:1".encode(), f"{JOB}:2".encode()]
    assert chunk_of({"job": "not a job id", "chunk": 0}) is None and chunk_of(["x"]) is None


def test_the_orphan_sweep_sends_a_chunk_whose_message_was_dropped_again_from_its_outbox(
    fake_redis, worker_tasks
):
    """A delivery record whose message is in no unacknowledged hash (rejected without requeue as Redis
    restarted, or lost with it): once the queue is empty the sweep sends the chunk again, once, as a
    `ChunkRef` (never for a job failed, stopped, or a chunk past its attempts)."""
    from pipeline.contract.keys import deliveries_key
    from pipeline.contract.tasks import VERSION
    from worker.config import settings
    from worker.heartbeat import record_delivery, restore_orphans

    store = new_job(fake_redis)
    for chunk in range(3):
        store.commit(
            JOB, store.claim(JOB), Checkpoint(chunks=chunk + 1), task=chunk_task(JOB, LINES[:2], chunk=chunk)
        )
    old = time.time() - 120
    for chunk in range(3):
        record_delivery(fake_redis, f"dropped-{chunk}", f"{JOB}:{chunk}", old)
    fake_redis.hset(JobKeys(JOB).attempts, 2, settings.max_attempts + 1)  # its last delivery answered it
    broker = FakeBroker()
    fake_redis.rpush(settings.queue, "a message of another chunk")  # it may be this chunk's: not yet
    assert restore_orphans(fake_redis, broker) == 0 and fake_redis.hlen(deliveries_key()) == 3
    fake_redis.delete(settings.queue)
    assert restore_orphans(fake_redis, broker) == 2 and not broker.restored
    ref = {"v": VERSION, "job": JOB, "chunk": 0, "ref": "outbox"}
    assert broker.sent == [(TASK_NAME, ref), (TASK_NAME, {**ref, "chunk": 1})]
    assert fake_redis.hlen(deliveries_key()) == 0 and restore_orphans(fake_redis, broker) == 0
    record_delivery(fake_redis, "dropped-again", f"{JOB}:0", old)
    store.update(JOB, {"state": "failed"})
    assert restore_orphans(fake_redis, broker) == 0 and len(broker.sent) == 2


@pytest.fixture(params=["fakeredis", pytest.param("redis", marks=pytest.mark.integration)])
def client(request):
    """A Redis client: fakeredis, or the session's real redis-server (a database of the test's own)."""
    return request.getfixturevalue("fake_redis" if request.param == "fakeredis" else "redis_client")


def test_the_sweep_forgets_what_killed_worker_processes_were_solving_and_keeps_the_live_ones(
    client, worker_tasks
):
    from pipeline.contract.keys import current_key
    from worker.config import settings
    from worker.heartbeat import beat, sweep_current

    now = time.time()
    beat(client, "host:1")  # alive
    client.zadd("sbatch:workers", {"host:2": now - settings.orphan_after_s - 1, "host:3": now - 3})
    client.hset(current_key(), mapping={f"host:{i}": f"{JOB}:{i}" for i in range(1, 5)})  # 4: never beat
    assert sweep_current(client, now) == 2
    assert sorted(client.hkeys(current_key())) == [b"host:1", b"host:3"]
    assert sweep_current(client, now) == 0


def test_the_client_never_imports_worker_and_solvers_never_import_celery_or_redis():
    code = (
        "import sys, client, client.cli, client.run, client.batch, client.transport, client.redis_store, "
        "client.report, client.generate, pipeline.engine.solve, pipeline.contract.keys,"
        " pipeline.engine.render.jsonl, pipeline.contract.wire;"
        "bad = sorted(m for m in sys.modules if m == 'worker' or m.startswith('worker.'));"
        "assert not bad, bad;"
        "print('ok')"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "ok"
    code = (
        "import sys, solvers, solvers.api, solvers.generate.generator, pipeline.engine.solve,"
        " pipeline.contract.keys, pipeline.engine.render.jsonl, pipeline.contract.wire,"
        " pipeline.contract.generate;"
        "top = {m.split('.')[0] for m in sys.modules};"
        "print(sorted(top & {'celery', 'kombu', 'redis', 'client', 'worker'}))"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"


def test_a_part_of_several_row_runs_is_published_once_and_no_later_part_may_answer_its_rows(
    fake_redis, worker_board
):
    """A chunk's first pass is one part around the puzzles left to race, and the raced puzzles one more: the
    parts hash holds their row runs, so a part meeting any of them is refused, and the chunk is complete
    when they add up to it (in Redis as in the embedded store)."""
    from client.memory_store import MemoryStore
    from pipeline.contract.runs import to_runs
    from pipeline.engine.solve import build_part
    from solvers.model.columns import ResultColumns
    from solvers.model.result import SolveResult, Status

    texts = LINES[:8]

    def part(rows: list[int]) -> Part:
        results = [SolveResult(Status.TIMEOUT, texts[r], error="x") for r in rows]
        columns = ResultColumns.build([texts[r] for r in rows], results)
        at = np.asarray(rows)
        runs = to_runs(rows)
        return build_part(JOB, 0, rows[0], 8, "in.txt", at, at + 1, columns, "jsonl", rows=runs)

    first, raced = part([0, 1, 3, 4, 5, 7]), part([2, 6])
    assert first.row_runs() == [(0, 2), (3, 3), (7, 1)] and raced.row_runs() == [(2, 1), (6, 1)]
    store = new_job(fake_redis)
    assert worker_board.publish_part(fake_redis, first, 60)
    assert not worker_board.publish_part(fake_redis, part([5, 6]), 60)  # row 5 is answered
    assert worker_board.RedisPort(fake_redis).answered(JOB, 0) == [(0, 2), (3, 3), (7, 1)]
    assert worker_board.publish_part(fake_redis, raced, 60)
    assert worker_board.RedisPort(fake_redis).answered(JOB, 0) is None  # done
    assert not fake_redis.hexists(JobKeys(JOB).outbox, 0) and store.status(JOB).chunks_done == 1
    embedded = MemoryStore()
    embedded.create(JOB, {"created": "0", "state": "producing"})
    assert embedded.put_result(JOB, first) and not embedded.put_result(JOB, part([6, 7]))
    assert embedded.answered(JOB, 0) == [(0, 2), (3, 3), (7, 1)]
    assert embedded.put_result(JOB, raced) and embedded.answered(JOB, 0) is None


def test_a_chunk_task_that_cannot_reach_redis_puts_its_message_back_instead_of_a_retry_with_a_countdown(
    worker_tasks, monkeypatch
):
    """Celery's autoretry sent a copy with a countdown (which workers now drop as a message asking to run
    later), and when the broker was away that send failed and Celery rejected the message without requeue:
    the chunk was gone (issue 31). Now the message itself goes back to the queue."""
    import redis
    from celery.exceptions import Reject

    def unreachable(*_):
        raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(worker_tasks, "handle", unreachable)
    for task in (worker_tasks.solve_chunk_task, worker_tasks.generate_chunk_task):
        with pytest.raises(Reject) as rejected:
            task(task={"v": 3, "job": JOB, "chunk": 0, "ref": "outbox"})
        assert rejected.value.requeue and "Connection refused" in str(rejected.value.reason)
