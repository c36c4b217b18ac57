"""The pipeline's cheap paths (issue #3) give the same answers as the general ones.

Reference messages (the worker reads the task from the outbox), results read straight
from the socket, results kept as objects in the embedded store, and the renderer's copy
of texts that need no escaping: each would lose or duplicate records if it went wrong.
"""

from __future__ import annotations

import json
import logging
import time

import numpy as np
import pytest

from client.collector import stream_chunks
from client.config import ClientSettings
from client.memory_store import MemoryStore
from client.redis_read import read_large
from client.redis_store import RedisJobStore
from client.store import Checkpoint
from pipeline.contract.part import Part
from pipeline.contract.runs import runs_array, to_runs
from pipeline.contract.tasks import VERSION, ChunkTask
from pipeline.engine.solve import solve_chunk
from solvers.model.result import SolveResult, Status
from tests.conftest import SAMPLE, check_records, chunk_task
from tests.jsonl_reference import columns, render, render_py

LINES = SAMPLE.read_text().splitlines()
JOB = "0b" * 16


def make_task(texts: list[str], chunk: int, first: int) -> ChunkTask:
    return chunk_task(JOB, texts, chunk=chunk, first=first)


@pytest.mark.parametrize(
    "text",
    ["." * 81, '"' + "." * 80, "\\" + "." * 80, "\x01" + "." * 80, "é" + "." * 80, "\x7f" + "." * 80],
)
def test_the_renderer_copies_plain_texts_and_escapes_the_others_exactly_like_python(text):
    results = [
        SolveResult(Status.SOLVED, "..", "12", 0, "propagation", 1e-5, 3),
        SolveResult(Status.APPROXIMATE, text, text, 4, "annealing", 2.0),
    ]
    texts = [r.puzzle for r in results]
    idx, lines = np.array([4, 9]), [1, 2]
    compiled = render("in", idx, lines, columns(texts, results))
    assert compiled == render_py("in", [4, 9], lines, columns(texts, results))
    assert [json.loads(x)["puzzle"] for x in compiled.split(b"\n")] == texts
    assert [json.loads(x)["solution"] for x in compiled.split(b"\n")] == ["12", text]


def test_runs_expand_the_same_as_arrays_and_as_lists():
    for runs in ([], [(0, 3)], [(5, 2), (10, 1), (0, 4)], to_runs([3, 4, 5, 9, 11, 12])):
        assert runs_array(runs).tolist() == [i for f, c in runs for i in range(f, f + c)]


def test_a_result_decodes_the_same_from_bytes_and_from_a_bytearray_it_takes_over():
    result = solve_chunk(make_task(LINES[:7], 0, 0))
    payload = result.encode()
    a, b = Part.decode(payload), Part.decode(bytearray(payload))
    assert a.header == b.header == result.header
    assert a.records == b.records == result.records and a.lines() == b.lines()


def ref(chunk: int) -> dict:
    """A ChunkRef as CeleryTransport sends it."""
    return {"v": VERSION, "job": JOB, "chunk": chunk, "ref": "outbox"}


def test_a_reference_message_is_solved_from_the_outbox_once_and_a_redelivery_adds_nothing(fake_redis):
    tasks = pytest.importorskip("worker.tasks")
    store = RedisJobStore(fake_redis, ClientSettings())
    store.create(JOB, {"created": str(time.time()), "state": "producing"})
    token = store.claim(JOB)
    sent = [make_task(LINES[:20], 0, 0), make_task(LINES[20:45], 1, 20)]
    for i, task in enumerate(sent):
        store.commit(JOB, token, Checkpoint(index=45 if i else 20, chunks=i + 1), None, None, task)
    refs = [ref(t.chunk) for t in sent]  # what CeleryTransport sends
    assert [tasks.handle(r, fake_redis) for r in refs] == [20, 25]
    assert store.outbox(JOB) == {}  # each result's MULTI dropped its task
    assert [tasks.handle(r, fake_redis) for r in refs] == [0, 0]  # redelivered after the answer: nothing
    assert tasks.handle(ref(7), fake_redis) == 0  # never sent
    assert tasks.handle({"job": JOB, "chunk": 0, "ref": "outbox"}, fake_redis) == 0  # older client: refused
    store.update(JOB, {"state": "produced", "total": "45", "chunks_total": "2"})
    records = [json.loads(x) for c in stream_chunks(store, JOB, result_ttl=60, poll=0.01) for x in c.lines()]
    check_records(sorted(records, key=lambda r: r["index"]), LINES[:45])
    assert fake_redis.lrange(store.keys(JOB).arrivals, 0, -1) == [b"0:0", b"1:0"]


def test_an_oversized_outbox_entry_is_refused_before_the_worker_reads_it(fake_redis, monkeypatch):
    tasks = pytest.importorskip("worker.tasks")
    store = RedisJobStore(fake_redis, ClientSettings())
    store.create(JOB, {"created": str(time.time()), "state": "producing"})
    fake_redis.hset(store.keys(JOB).outbox, "0", "x" * 2048)  # a hand-made entry
    monkeypatch.setattr(pytest.importorskip("worker.board"), "MAX_OUTBOX_BYTES", 1024)
    read: list[object] = []
    monkeypatch.setattr(fake_redis, "hget", lambda *a: read.append(a))
    monkeypatch.setattr(tasks, "store_client", lambda: fake_redis)
    assert tasks.solve_chunk_task.run(ref(0)) == 0  # dropped, logged
    assert read == []  # its size was checked first: never loaded


def test_the_client_sends_a_reference_not_the_puzzles(monkeypatch):
    from client.transport import CeleryTransport

    sent: list[dict] = []
    transport = CeleryTransport("redis://127.0.0.1:1/0", ClientSettings())
    monkeypatch.setattr(transport.app, "send_task", lambda name, kwargs, **kw: sent.append(kwargs))
    transport.send(make_task(LINES[:5], 3, 0))
    assert sent == [{"task": {"v": VERSION, "job": JOB, "chunk": 3, "ref": "outbox"}}]


def test_the_memory_store_hands_the_collector_its_result_objects_and_still_encodes_them():
    store = MemoryStore()
    store.create(JOB, {"created": str(time.time()), "state": "produced", "total": "9"})
    results = [solve_chunk(make_task(LINES[:6], 0, 0)), solve_chunk(make_task(LINES[6:9], 1, 6))]
    store.put_result(JOB, results[1])
    store.put_result(JOB, results[0])
    parts = [(0, 0), (1, 0), (2, 0)]
    assert store.fetch_results(JOB, parts)[:2] == results and store.fetch_results(JOB, [(2, 0)]) == [None]
    assert [Part.decode(p).records for p in store.fetch(JOB, parts[:2])] == [r.records for r in results]  # noqa: E501
    got = list(stream_chunks(store, JOB, result_ttl=0, poll=0.01))
    assert sorted(r.header.chunk for r in got) == [0, 1]


@pytest.mark.integration
def test_large_results_read_from_the_socket_equal_what_redis_holds(redis_client):
    """`read_large` reads past redis-py's reply parser (its private buffer and socket: redis is pinned in
    pyproject to the versions this test passed on); it must be taken, and agree with a plain GET."""
    import redis

    value = bytes(range(256)) * 40_000 + b"\r\n\n"  # 10 MB, every byte value, CRLF inside
    redis_client.set("big", value)
    redis_client.set("small", b"a\nb")
    redis_client.hset("hash", "f", "v")
    for _ in range(2):
        assert read_large(redis_client, "big") == value
        assert read_large(redis_client, "small") == b"a\nb"
        assert read_large(redis_client, "missing") is None
        assert read_large(redis_client, "hash") is NotImplemented  # WRONGTYPE: the caller's plain path
        assert redis_client.get("small") == b"a\nb"  # the connection is still in step
    where = redis_client.connection_pool.connection_kwargs
    for size in (0, 1, 65_535, 65_536, 3_000_001):  # the fast path against redis-py's own GET
        redis_client.set("sized", value[:size])
        fast = read_large(redis_client, "sized")
        assert isinstance(fast, bytearray), "the installed redis-py no longer has the buffer read_large reads"
        assert fast == redis_client.get("sized") == value[:size]
    for protocol in (2, 3):
        client = redis.Redis(host=where["host"], port=where["port"], db=where.get("db", 0), protocol=protocol)
        assert read_large(client, "big") == value and read_large(client, "missing") is None
        client.close()


@pytest.mark.integration
def test_a_large_read_that_falls_back_to_the_ordinary_path_logs_why_in_one_line(redis_client, caplog):
    redis_client.hset("hash", "f", "v")
    with caplog.at_level(logging.DEBUG, "client.redis_read"):
        assert read_large(redis_client, "hash") is NotImplemented
    lines = [r.getMessage() for r in caplog.records if r.name == "client.redis_read"]
    assert len(lines) == 1 and "WRONGTYPE" in lines[0], lines


@pytest.mark.integration
def test_an_interrupt_inside_a_large_read_drops_its_connection(redis_client, monkeypatch):
    """Ctrl-C after the GET is sent: the reply still in flight must never answer the next command."""
    import redis

    redis_client.set("big", b"x" * 1_000_000)
    send = redis.Connection.send_command

    def send_then_interrupt(self, *args, **kwargs):
        send(self, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(redis.Connection, "send_command", send_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        read_large(redis_client, "big")
    monkeypatch.undo()
    pool = redis_client.connection_pool
    assert all(conn._sock is None for conn in pool._available_connections)  # nothing half read is pooled
    redis_client.hset("meta", "state", "producing")
    assert redis_client.hgetall("meta") == {b"state": b"producing"}


def test_outbox_entries_nest_the_task_and_older_string_entries_still_read():
    from pipeline.contract.outbox import outbox_entry, read_outbox_entry

    task = make_task(LINES[:3] + ['with "quotes" \\ and\ttabs'], 2, 0)
    at = time.time()
    entry = outbox_entry(at, task.model_dump_json())
    assert json.loads(entry)["task"] == json.loads(task.model_dump_json())  # plain JSON, task nested
    assert read_outbox_entry(entry.encode()) == (at, task.model_dump_json())
    old = json.dumps({"at": at, "task": task.model_dump_json()})  # as written before the nesting
    assert read_outbox_entry(old) == (at, task.model_dump_json())
    nested_spaced = json.dumps({"at": at, "task": json.loads(task.model_dump_json())})
    assert ChunkTask.model_validate_json(read_outbox_entry(nested_spaced)[1]) == task


def test_a_large_read_that_cannot_connect_leaves_it_to_the_retrying_path():
    import redis

    client = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    assert read_large(client, "anything") is NotImplemented
