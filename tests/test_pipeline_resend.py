"""The outbox and the resend sweep (fakeredis): a sent task stays until its result is stored."""

from __future__ import annotations

import time

import pytest

from client.config import ClientSettings
from client.redis_store import RedisJobStore
from client.resend import Resender
from client.store import Checkpoint
from client.transport import Transport
from pipeline.contract.keys import current_key, workers_key
from pipeline.contract.tasks import ChunkTask
from tests.conftest import SAMPLE, chunk_task, failed_chunk

JOB = "0c" * 16
TEXTS = SAMPLE.read_text().splitlines()[:3]


class Recorder(Transport):
    """A transport that keeps what it was asked to send."""

    def __init__(self) -> None:
        self.sent: list[ChunkTask] = []

    def send(self, task: ChunkTask) -> None:
        self.sent.append(task)


def task(chunk: int) -> ChunkTask:
    """A three-puzzle chunk task of JOB."""
    return chunk_task(JOB, TEXTS, chunk=chunk, first=3 * chunk, seeded=False)


@pytest.fixture
def store(fake_redis) -> RedisJobStore:
    """A Redis job store on fakeredis with JOB created."""
    s = RedisJobStore(fake_redis, ClientSettings())
    s.create(JOB, {"created": str(time.time()), "state": "producing"})
    return s


def sent(store: RedisJobStore, task: ChunkTask) -> None:
    """Keep `task` in the outbox as a producer does before it sends it (`JobStore.commit`)."""
    store.commit(JOB, store.claim(JOB), Checkpoint(chunks=task.chunk + 1), task=task)


def age(store: RedisJobStore, seconds: float) -> None:
    """Make every outbox entry of JOB look `seconds` older."""
    for chunk, (at, _) in store.outbox(JOB).items():
        entry = store.r.hget(store.keys(JOB).outbox, str(chunk))
        store.r.hset(
            store.keys(JOB).outbox, str(chunk), entry.replace(repr(at).encode(), repr(at - seconds).encode())
        )


def test_a_sent_task_stays_in_the_outbox_until_its_result_is_stored(store):
    sent(store, task(0))
    sent(store, task(1))
    assert sorted(store.outbox(JOB)) == [0, 1]
    assert ChunkTask.model_validate_json(store.outbox(JOB)[1][1]) == task(1)
    store.put_result(JOB, failed_chunk(task(0), "answered"))
    assert sorted(store.outbox(JOB)) == [1]
    assert store.r.ttl(store.keys(JOB).outbox) > 0
    store.purge(JOB)
    assert store.outbox(JOB) == {}


def test_a_resend_is_claimed_once_and_not_after_the_result_came(store):
    sent(store, task(0))
    sent(store, task(1))
    (at0, _), (at1, _) = store.outbox(JOB)[0], store.outbox(JOB)[1]
    assert store.claim_resend(JOB, 0, at0)
    assert not store.claim_resend(JOB, 0, at0)  # a second collector with the old stamp loses
    store.put_result(JOB, failed_chunk(task(1), "answered"))
    assert not store.claim_resend(JOB, 1, at1)
    assert store.outbox(JOB).keys() == {0}
    assert store.meta(JOB)["resent"] == "1"


def test_the_sweep_resends_only_stale_tasks_no_live_worker_is_solving(store):
    recorder = Recorder()
    resender = Resender(store, JOB, lambda: recorder, after=5.0)
    for chunk in range(3):
        sent(store, task(chunk))
    resender._last -= 10
    assert resender.sweep(idle=10.0) == 0  # sent just now: not lost, only not solved yet
    age(store, 10)
    store.r.zadd(workers_key(), {"w1@host:1": time.time()})
    store.r.hset(current_key(), "w1@host:1", f"{JOB}:1")
    assert resender.sweep(idle=10.0) == 0  # swept less than `after` s ago
    resender._last -= 10
    assert resender.sweep(idle=1.0) == 0  # results are still arriving
    store.r.rpush(store.settings.queue, b"{}")
    assert resender.sweep(idle=10.0) == 0  # the queue has not drained: the tasks may be in it
    store.r.delete(store.settings.queue)
    resender._last -= 10
    assert resender.sweep(idle=10.0) == 2
    assert [t.chunk for t in recorder.sent] == [0, 2]
    assert store.status(JOB).resent == 2
    resender._last -= 10
    assert resender.sweep(idle=20.0) == 0  # re-stamped: given another `after` s


def test_a_broker_outage_during_the_sweep_leaves_the_tasks_for_the_next_one(store):
    class Down(Transport):
        def send(self, task: ChunkTask) -> None:
            raise ConnectionError("cannot send to broker")

    resender = Resender(store, JOB, Down, after=1.0)
    sent(store, task(0))
    age(store, 5)
    resender._last -= 5
    assert resender.sweep(idle=5.0) == 0
    assert store.outbox(JOB).keys() == {0}


def test_generate_resends_a_chunk_the_broker_lost_and_reads_each_chunk_once(store):
    from client.collector import chunk_order, stream_chunks
    from client.plan import JobSpec
    from client.producer import Producer
    from pipeline.contract.generate import GenerateHeader, GenerateResult, GenerateTask
    from pipeline.contract.part import PartStats

    sends: list[int] = []

    class Worker(Transport):
        """A worker answering at once, except that the first message of chunk 3 is lost."""

        def send(self, task: GenerateTask) -> None:
            sends.append(task.chunk)
            if task.chunk == 3 and sends.count(3) == 1:
                return
            header = GenerateHeader(job=JOB, chunk=task.chunk, stats=PartStats(n=2))
            store.put_result(JOB, GenerateResult(header, [f"p{task.chunk}"] * 2, ["s"] * 2, ["{}"] * 2))

    store.update(JOB, {"kind": "generate"})
    tasks = [GenerateTask(job=JOB, chunk=i, box="2x2", count=2, seed=i) for i in range(5)]
    Producer(JobSpec(JOB, []), store, Worker(), store.settings).run_plan(tasks)  # the same producer as solve
    resender = Resender(store, JOB, Worker, after=0.2)  # and the same resend sweep, from the outbox
    stream = stream_chunks(
        store, JOB, result_ttl=0, poll=0.01, sweep=resender.sweep, decode=GenerateResult.decode
    )
    results = list(chunk_order(stream))
    assert [r.puzzles[0] for r in results] == [f"p{i}" for i in range(5)]
    assert sorted(sends) == [0, 1, 2, 3, 3, 4] and store.meta(JOB)["resent"] == "1"
