"""The producer answers invalid lines itself, sends the rest in sized chunks, and respects its window."""

from __future__ import annotations

import logging
import random
import threading

import pytest

from client.collector import in_order
from client.config import ClientSettings
from client.memory_store import MemoryStore
from client.pending import ChunkSizer
from client.plan import JobSpec
from client.producer import Producer
from client.transport import Transport
from pipeline.contract.runs import expand_runs
from pipeline.contract.tasks import ChunkTask
from pipeline.engine.solve import answered_chunk, solve_chunk
from tests.conftest import SAMPLE, wait_until

LINES = SAMPLE.read_text().splitlines()
JOB = "ef" * 16


class Recorder(Transport):
    """Keeps the tasks it is sent (nothing solves them)."""

    def __init__(self) -> None:
        self.tasks: list[ChunkTask] = []

    def send(self, task: ChunkTask) -> None:
        self.tasks.append(task)


def run(sources, settings=None, window=None, transport=None):
    store = MemoryStore()
    spec = JobSpec(JOB, [n for n, _ in sources])
    store.create(JOB, spec.meta())
    transport = transport or Recorder()
    producer = Producer(spec, store, transport, settings or ClientSettings(), window)
    return producer, producer.run(sources), store, transport


def test_lines_that_are_no_puzzle_are_answered_by_the_producer_and_compact_ones_checked_where_parsed():
    lines = LINES[:10] + ["nonsense", "1" * 81] + LINES[10:20] + ["", "# note"]
    producer, total, store, transport = run([("a.txt", lines)])
    assert total == 22
    sent = [i for t in transport.tasks for i in expand_runs(t.index_runs)]
    assert sent == list(range(10)) + list(range(11, 22))  # "1" * 81: the solver's parse answers it
    answered = [r for r in store.stats(JOB)]
    assert sum(s.counts.get("invalid", 0) for s in answered) == 1
    assert [(p.index, p.line) for s in answered for p in s.problems] == [(10, 11)]
    (task,) = [t for t in transport.tasks if 11 in expand_runs(t.index_runs)]
    solved = solve_chunk(task)
    assert solved.header.stats.counts["invalid"] == 1
    assert [(p.index, p.line, p.error) for p in solved.header.stats.problems] == [(11, 12, "row 1 has 9 1s")]
    meta = store.meta(JOB)
    assert meta["state"] == "produced" and meta["total"] == "22"
    assert int(meta["chunks_total"]) == len(transport.tasks) + 1


def test_chunks_never_span_inputs_and_keep_each_puzzles_line_and_text():
    _, total, _, transport = run([("a.txt", LINES[:30]), ("b.txt", LINES[30:45])])
    assert total == 45
    by_input = {t.input: t for t in transport.tasks}
    assert set(by_input) == {"a.txt", "b.txt"}
    b = by_input["b.txt"]
    assert expand_runs(b.index_runs) == list(range(30, 45)) and expand_runs(b.line_runs) == list(range(1, 16))
    assert b.texts() == LINES[30:45]
    assert all(t.seed and t.job == JOB for t in transport.tasks)


def test_chunk_size_is_bounded_by_the_payload_limit():
    _, total, _, transport = run([("a.txt", LINES)], ClientSettings(max_chunk_bytes=82 * 50))
    assert total == len(LINES)
    assert max(len(t) for t in transport.tasks) <= 50 and sum(len(t) for t in transport.tasks) == len(LINES)


def test_the_sizer_starts_small_grows_at_most_twofold_and_aims_at_the_target_time():
    sizer = ChunkSizer(target_s=1.0, max_bytes=1 << 30)
    sizes = [sizer.next(81, None) for _ in range(6)]
    assert sizes[0] == 1024 and sizes[1] == 2048 and max(sizes) == 8 * 1024
    sizer = ChunkSizer(target_s=1.0, max_bytes=1 << 30)
    assert [sizer.next(81, 1e-5) for _ in range(10)][-1] == 100_000
    assert sizer.next(81, 0.1) == 10  # hard puzzles shrink the next chunk at once
    assert ChunkSizer(1.0, 1 << 30).next(625, None) == 1  # 25x25 grids start one per chunk


def test_the_window_holds_the_producer_until_chunks_come_back():
    store = MemoryStore()
    spec = JobSpec(JOB, ["a"])
    store.create(JOB, spec.meta())
    transport = Recorder()
    settings = ClientSettings(max_chunk_bytes=82 * 10, poll_interval=0.01)
    asked: list[int] = []  # the tasks sent each time the producer asks the window (again while it waits)

    def window() -> int:
        asked.append(len(transport.tasks))
        return 2

    producer = Producer(spec, store, transport, settings, window=window)
    thread = threading.Thread(target=producer.run, args=([("a", LINES[:60])],))
    thread.start()
    wait_until(lambda: asked.count(2) >= 2, 10, "producer waiting with two chunks sent")
    assert len(transport.tasks) == 2  # blocked: two chunks in flight, none answered
    for task in list(transport.tasks):
        idx = expand_runs(task.index_runs)
        store.put_result(JOB, answered_chunk(JOB, task.chunk, "a", idx, idx, task.texts(), ["x"] * len(idx)))
    wait_until(lambda: asked.count(4) >= 2, 10, "producer waiting with four chunks sent")
    assert len(transport.tasks) == 4
    for task in transport.tasks[2:]:
        idx = expand_runs(task.index_runs)
        store.put_result(JOB, answered_chunk(JOB, task.chunk, "a", idx, idx, task.texts(), ["x"] * len(idx)))
    thread.join(10)
    assert not thread.is_alive() and sum(len(t) for t in transport.tasks) == 60


def test_a_producer_error_marks_the_job_failed_with_the_reason():
    class Broken(Transport):
        def send(self, task):
            raise ConnectionError("broker went away")

    store = MemoryStore()
    spec = JobSpec(JOB, ["a"])
    store.create(JOB, spec.meta())
    with pytest.raises(ConnectionError):
        Producer(spec, store, Broken(), ClientSettings()).run([("a", LINES[:5])])
    meta = store.meta(JOB)
    assert meta["state"] == "failed" and "broker went away" in meta["error"]


class AwayAtTheEnd(MemoryStore):
    """A store that fails the producer's last word: marking the job failed, or its beat reset."""

    def update(self, job, fields):
        if fields.get("state") == "failed" or fields.get("producer_beat") == "0":
            raise ConnectionError("store away")
        super().update(job, fields)


def test_a_job_the_store_cannot_mark_failed_is_logged_in_one_line_and_the_caller_gets_the_error(caplog):
    class Broken(Transport):
        def send(self, task):
            raise ConnectionError("broker went away")

    store, spec = AwayAtTheEnd(), JobSpec(JOB, ["a"])
    store.create(JOB, spec.meta())
    with caplog.at_level(logging.INFO, "client.producer"), pytest.raises(ConnectionError, match="broker"):
        Producer(spec, store, Broken(), ClientSettings()).run([("a", LINES[:5])])
    (record,) = [r for r in caplog.records if r.name == "client.producer"]
    line = record.getMessage()  # info: the caller's error is the command's one line; this is the detail
    assert record.levelno == logging.INFO and "not marked failed" in line
    assert "broker went away" in line and "store away" in line


def test_a_producer_leaving_that_the_store_cannot_record_is_logged_in_one_line(caplog):
    store, spec = AwayAtTheEnd(), JobSpec(JOB, ["a"])
    store.create(JOB, spec.meta())
    producer = Producer(spec, store, Recorder(), ClientSettings())
    producer.token = store.claim(JOB)
    with caplog.at_level(logging.WARNING, "client.producer"):
        producer.leave()
    (line,) = [r.getMessage() for r in caplog.records if r.name == "client.producer"]
    assert "leaving is not recorded" in line and "store away" in line


def test_in_order_merges_shuffled_chunks_by_index_and_passes_ordered_ones_straight_through():
    store = MemoryStore()
    store.create(JOB, JobSpec(JOB, ["a"]).meta())
    parts = [list(range(0, 5)), list(range(5, 7)) + list(range(9, 12)), [7, 8], list(range(12, 20))]
    chunks = [answered_chunk(JOB, c, "a", p, p, ["x"] * len(p), ["e"] * len(p)) for c, p in enumerate(parts)]
    shuffled = chunks[:]
    random.Random(4).shuffle(shuffled)
    order = [i for result, a, b in in_order(shuffled) for i in result.indices()[a:b]]
    assert order == list(range(20))
    emitted = []
    for result, a, b in in_order(iter(chunks)):
        emitted.append((result.header.chunk, a, b))
    assert emitted[0] == (0, 0, 5) and emitted[1] == (1, 0, 2)  # nothing waits for later chunks


def test_a_seeded_job_records_its_seed_and_derives_every_chunk_seed_from_it_not_from_the_job_id():
    settings = ClientSettings(max_chunk_bytes=83 * 5)
    seeded = []
    for job in ("ab" * 16, "cd" * 16):
        store, transport = MemoryStore(), Recorder()
        spec = JobSpec(job, ["a.txt"], seed=7)
        store.create(job, spec.meta())
        Producer(spec, store, transport, settings).run([("a.txt", LINES[:20])])
        assert JobSpec.from_meta(job, store.meta(job)).seed == 7  # a resume keeps it
        seeded.append([t.seed for t in transport.tasks])
    assert seeded[0] == seeded[1] and len(set(seeded[0])) == len(seeded[0]) > 1
    _, _, _, unseeded = run([("a.txt", LINES[:20])], settings)
    assert [t.seed for t in unseeded.tasks] != seeded[0]


def test_a_seed_outside_63_bits_is_refused_before_the_job_starts():
    from client.batch import BatchClient

    with BatchClient(None, workers=1) as client:
        for seed in (-1, 2**63):
            with pytest.raises(ValueError, match="seed"):
                client.submit(LINES[:1], seed=seed)


def test_every_message_that_carries_a_seed_takes_the_largest_the_client_takes_and_refuses_one_more():
    from pydantic import ValidationError

    from pipeline.contract.generate import GenerateTask
    from pipeline.contract.tasks import MAX_SEED, ChunkTask
    from pipeline.escalation.task import HelperTask

    job = "ab" * 16
    made = {
        ChunkTask: lambda seed: ChunkTask(
            job=job, chunk=0, input="a", index_runs=[(0, 1)], line_runs=[(1, 1)], puzzles=LINES[0], seed=seed
        ),
        GenerateTask: lambda seed: GenerateTask(job=job, chunk=0, box="3x3", count=1, seed=seed),
        HelperTask: lambda seed: HelperTask(job=job, chunk=0, row=0, helper=1, puzzle=LINES[0], seed=seed),
    }
    for kind, make in made.items():
        assert make(MAX_SEED).seed == MAX_SEED == 2**63 - 1, kind
        with pytest.raises(ValidationError, match="seed"):
            make(MAX_SEED + 1)
