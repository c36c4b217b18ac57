"""The job stores keep one answer per chunk, stream it once, report status, and purge cleanly.

Every case runs against the in-memory store, Redis faked in process (fakeredis), and a
real redis-server (integration): one contract, three implementations.
"""

from __future__ import annotations

import time

import pytest

from client.collector import JobFailed, stream_chunks
from client.config import ClientSettings
from client.memory_store import MemoryStore
from client.redis_store import RedisJobStore
from client.store import JobStore
from pipeline.contract.keys import JobKeys, workers_key
from pipeline.engine.solve import answered_chunk

JOB = "cd" * 16


@pytest.fixture(params=["memory", "fakeredis", pytest.param("redis", marks=pytest.mark.integration)])
def store(request) -> JobStore:
    if request.param == "memory":
        return MemoryStore()
    client = request.getfixturevalue("fake_redis" if request.param == "fakeredis" else "redis_client")
    return RedisJobStore(client, ClientSettings(result_ttl=60, job_ttl=600))


def chunk(n: int, first: int, chunk_id: int):
    """A producer-style chunk result of `n` invalid lines starting at index `first`."""
    indices = list(range(first, first + n))
    return answered_chunk(JOB, chunk_id, "f", indices, [i + 1 for i in indices], ["x"] * n, ["bad"] * n)


def produced(store: JobStore, total: int, chunks: int) -> None:
    store.update(JOB, {"state": "produced", "total": str(total), "chunks_total": str(chunks)})


def collect(store: JobStore, **kw) -> list[int]:
    return [r.header.chunk for r in stream_chunks(store, JOB, result_ttl=60, poll=0.01, **kw)]


def test_a_chunk_stored_twice_is_collected_once_and_counted_once(store):
    store.create(JOB, {"created": str(time.time()), "state": "producing"})
    store.put_result(JOB, chunk(3, 0, 0))
    store.put_result(JOB, chunk(3, 0, 0))  # redelivered after a crash
    store.put_result(JOB, chunk(2, 3, 1))
    produced(store, 5, 2)
    assert collect(store) == [0, 1]
    status = store.status(JOB)
    assert status.done == 5 and status.counts == {"invalid": 5} and status.chunks_done == 2
    assert status.state == "produced" and status.total == 5


def test_the_collector_streams_chunks_as_they_arrive_and_stops_when_all_are_in(store):
    store.create(JOB, {"created": str(time.time()), "state": "producing"})
    store.put_result(JOB, chunk(1, 1, 1))
    stream = stream_chunks(store, JOB, result_ttl=60, poll=0.01)
    assert next(stream).header.chunk == 1
    store.put_result(JOB, chunk(1, 0, 0))
    produced(store, 2, 2)
    assert [r.header.chunk for r in stream] == [0]


def test_a_failed_job_stops_the_collector_with_its_reason(store):
    store.create(JOB, {"created": str(time.time()), "state": "producing"})
    store.update(JOB, {"state": "failed", "error": "disk on fire"})
    with pytest.raises(JobFailed, match="disk on fire"):
        collect(store)


def test_a_producer_that_went_silent_fails_the_collection(store):
    store.create(
        JOB, {"created": str(time.time() - 100), "state": "producing", "producer_beat": str(time.time() - 99)}
    )
    with pytest.raises(JobFailed, match="producer stopped"):
        collect(store, stale_after=10)


def test_an_unknown_job_fails_the_collection_and_its_status_says_so(store):
    with pytest.raises(JobFailed, match="no job"):
        collect(store)
    assert store.status(JOB).state == "unknown"


@pytest.mark.parametrize("stop", [True, False])
def test_purge_removes_every_key_of_the_job_but_a_short_lived_stop_key(store, stop):
    store.create(JOB, {"created": str(time.time()), "state": "producing"})
    for c in range(3):
        store.put_result(JOB, chunk(2, 2 * c, c))
    assert store.purge(JOB, stop=stop) >= 1
    assert store.meta(JOB) == {} and store.stats(JOB) == []
    assert store.fetch(JOB, [(0, 0), (1, 0), (2, 0)]) == [None] * 3
    store.update(JOB, {"producer_beat": "1"})  # a late heartbeat does not bring the job back
    assert store.meta(JOB) == {}
    if isinstance(store, RedisJobStore):
        stop_key = f"sbatch:job:{JOB}:stop".encode()
        assert store.r.keys(f"sbatch:job:{JOB}*") == ([stop_key] if stop else [])
        assert not stop or 0 < store.r.ttl(stop_key) <= store.settings.stop_ttl


def test_a_collection_can_be_rerun_while_collected_results_live_their_short_ttl(store):
    store.create(JOB, {"created": str(time.time()), "state": "producing"})
    for c in range(3):
        store.put_result(JOB, chunk(2, 2 * c, c))
    produced(store, 6, 3)
    assert collect(store) == [0, 1, 2]
    assert collect(store) == [0, 1, 2]  # a re-run after a crash (or a second read) sees everything once more
    if isinstance(store, RedisJobStore):
        assert 0 < store.r.ttl(JobKeys(JOB).part(0, 0)) <= 60


def test_redis_expired_results_fail_the_collection_rather_than_silently_skipping(store):
    if not isinstance(store, RedisJobStore):
        pytest.skip("redis only")
    store.create(JOB, {"created": str(time.time()), "state": "producing"})
    store.put_result(JOB, chunk(2, 0, 0))
    produced(store, 2, 1)
    store.r.delete(JobKeys(JOB).part(0, 0))
    with pytest.raises(JobFailed, match="expired"):
        collect(store)


def test_live_workers_are_those_that_beat_recently(store):
    if not isinstance(store, RedisJobStore):
        pytest.skip("redis only")
    store.r.zadd(workers_key(), {"host:1": time.time(), "host:2": time.time() - 600})
    assert store.live_workers() == ["host:1"]


def test_the_sizing_hint_adds_up_the_solved_puzzles(store):
    store.create(JOB, {"created": str(time.time()), "state": "producing"})
    store.put_result(JOB, chunk(4, 0, 0))
    store.put_result(JOB, chunk(3, 4, 1))
    assert store.hint(JOB)[0] == 7
    assert store.arrived_count(JOB) == 2


def test_a_waiting_collector_wakes_when_a_part_arrives_or_the_job_changes_and_not_otherwise(store):
    import threading

    store.create(JOB, {"created": str(time.time()), "state": "producing"})
    start = time.monotonic()
    assert not store.wait_arrival(JOB, 0.3)  # nothing happened: a timeout, no wake
    assert time.monotonic() - start >= 0.25
    for event in (lambda: store.put_result(JOB, chunk(1, 0, 0)), lambda: produced(store, 1, 1)):
        timer = threading.Timer(0.2, event)
        timer.start()
        start = time.monotonic()
        assert store.wait_arrival(JOB, 10)
        assert time.monotonic() - start < 5  # woken, not timed out
        timer.join()


def test_jobs_lists_the_newest_first_with_phase_progress_and_inputs_the_same_in_every_store(store):
    now = time.time()
    older, newer = "0e" * 16, "1f" * 16
    store.create(older, {"created": f"{now - 60:.3f}", "state": "produced", "total": "2", "inputs": "a.txt"})
    store.create(newer, {"created": f"{now - 5:.3f}", "state": "producing", "inputs": "b.txt\nc.txt"})
    store.put_result(older, answered_chunk(older, 0, "a.txt", [0, 1], [1, 2], ["x", "y"], ["bad", "bad"]))
    store.put_result(newer, answered_chunk(newer, 0, "b.txt", [0], [1], ["x"], ["bad"]))
    shown = [(s.job, s.phase, s.done, s.total, s.inputs, round(s.created)) for s in store.jobs(10)]
    assert shown == [
        (newer, "submitting", 1, None, ["b.txt", "c.txt"], round(now - 5)),
        (older, "done", 2, 2, ["a.txt"], round(now - 60)),
    ]
    assert [s.job for s in store.jobs(1)] == [newer]
    store.purge(newer)
    assert [s.job for s in store.jobs(10)] == [older]


def test_cancel_marks_the_job_cancelled_once_keeps_its_results_and_the_collector_ends_after_them(store):
    store.create(JOB, {"created": str(time.time()), "state": "producing", "checkpoint": "{}"})
    store.put_result(JOB, chunk(2, 0, 0))
    assert store.cancel(JOB) and not store.cancel(JOB)  # a second cancel finds it stopped
    status = store.status(JOB)
    assert (status.phase, status.state, status.error, status.done, status.eta_s) == (
        "cancelled",
        "failed",
        "the job was cancelled",
        2,
        None,
    )
    read: list[int] = []
    with pytest.raises(JobFailed, match="the job was cancelled"):
        for part in stream_chunks(store, JOB, result_ttl=60, poll=0.01):
            read.append(part.header.chunk)
    assert read == [0]
    assert store.fetch(JOB, [(0, 0)]) != [None]
    assert not store.cancel("ef" * 16)  # no such job
    if isinstance(store, RedisJobStore):  # workers drop its chunks and write nothing more
        stop = f"sbatch:job:{JOB}:stop"
        assert store.r.get(stop) == b"cancelled" and store.r.ttl(stop) > store.settings.stop_ttl
        store.update(JOB, {"state": "produced"})
        assert store.meta(JOB)["state"] == "failed"
