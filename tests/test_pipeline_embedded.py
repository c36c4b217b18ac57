"""`BatchClient()` with no broker: the same pipeline in local processes, streaming verified results."""

from __future__ import annotations

import json
import time

import pytest

from client import BatchClient, Record
from tests.conftest import SAMPLE, check_records, run_cli

LINES = SAMPLE.read_text().splitlines()


def test_an_embedded_job_streams_one_verified_record_per_puzzle_in_input_order():
    client = BatchClient(workers=2)
    assert client.embedded
    puzzles = LINES[:150] + ["oops"] + LINES[150:]
    job = client.submit(puzzles, time_limit=5)
    records = [r.to_dict() for r in job.results(ordered=True)]
    check_records(records, puzzles)
    assert records[150]["status"] == "invalid" and records[150]["line"] == 151
    assert all(isinstance(r, Record) for r in [Record(**records[0])])
    status = job.status()
    assert (
        status.state == "produced" and status.done == len(puzzles) and status.counts["solved"] == len(LINES)
    )


def test_a_tiny_embedded_job_is_solved_in_process_without_starting_workers():
    client = BatchClient(workers=2)
    job = client.submit(LINES[:50])
    assert not client.pool.started
    assert len(list(job.results())) == 50


def test_embedded_mode_rejects_an_unknown_portfolio_before_reading_anything():
    with pytest.raises(ValueError, match="no-such-portfolio"):
        BatchClient().submit(LINES[:3], portfolio="no-such-portfolio")


def test_results_can_be_streamed_in_arrival_order_from_a_file(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("\n".join(LINES[:100]) + "\n")
    job = BatchClient(workers=1).submit(path)
    records = sorted((r.to_dict() for r in job.results()), key=lambda r: r["index"])
    check_records(records, LINES[:100])
    assert {r["input"] for r in records} == {str(path)}


def test_a_small_input_of_large_grids_is_spread_over_the_pool_not_solved_in_process(tmp_path):
    from client.plan import small_inputs

    easy = tmp_path / "easy.txt"
    easy.write_text("53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79\n" * 3)
    big = tmp_path / "big.txt"
    big.write_text(("." * 625 + "\n") * 3)
    one_big = tmp_path / "one.txt"
    one_big.write_text("# a comment\n" + "." * 625 + "\n")
    assert small_inputs([("easy", easy)]) and small_inputs([("one", one_big)], escalate=False)
    assert not small_inputs(
        [("one", one_big)]
    )  # escalated, one hard puzzle is raced by the pool's idle processes
    assert not small_inputs([("big", big)])
    assert not small_inputs([("many", ["." * 81] * 200)])  # more bytes than INLINE_BYTES


def test_an_embedded_job_can_be_read_again_as_a_broker_job_can():
    with BatchClient(workers=2) as client:
        job = client.submit(LINES * 3)  # over INLINE_BYTES: solved by the pool
        first = [r.to_dict() for r in job.results(ordered=True)]
        again = [r.to_dict() for r in job.results(ordered=True)]
    assert len(first) == 3 * len(LINES) and again == first


def test_reading_with_keep_false_frees_the_results_as_it_goes():
    from client.collector import JobFailed

    with BatchClient(workers=1) as client:
        job = client.submit(LINES[:20])
        assert len(list(job.results(keep=False))) == 20
        with pytest.raises(JobFailed, match="expired"):
            list(job.results())


def test_the_memory_store_keeps_collected_results_for_their_ttl_then_drops_them():
    from client.memory_store import MemoryStore
    from tests.conftest import chunk_task, failed_chunk

    now = [1000.0]
    store, job = MemoryStore(clock=lambda: now[0]), "ab" * 16
    store.create(job, {"created": "0"})
    for chunk in (0, 1):
        store.put_result(job, failed_chunk(chunk_task(job, LINES[:2], chunk=chunk), "x"))
    first, second = (0, 0), (1, 0)  # each chunk answered whole: one part from row 0
    store.mark_collected(job, [first], 0)
    store.mark_collected(job, [second], 1)
    assert store.fetch_results(job, [first])[0] is None and store.fetch_results(job, [second])[0] is not None
    now[0] += 0.9
    assert store.fetch_results(job, [second])[0] is not None
    now[0] += 0.2
    assert store.fetch_results(job, [second]) == [None]


def test_a_puzzle_solved_in_process_longer_than_a_silent_producer_may_be_still_gets_its_record(tmp_path):
    """The in-process solve runs beside the producer, not in its thread: its beat goes on, so a collector
    never takes a long search for a dead submission (a 49x49 puzzle searched for 120 s failed so)."""
    path = tmp_path / "one.txt"
    path.write_text("12345678." + "........9" + "." * 63 + "\n")  # no solution; stochastic solvers go on
    env = {"SUDOKU_BATCH_PRODUCER_STALE_S": "2"}  # a producer silent 2 s has died
    run = run_cli(
        "solve",
        str(path),
        "--portfolio",
        "stochastic",
        "--time-limit",
        "4",
        "-o",
        str(tmp_path / "out.jsonl"),
        "-q",
        env=env,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    (record,) = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert record["status"] == "approximate" and record["line"] == 1, record


def test_a_producer_thread_of_this_process_busy_longer_than_a_silent_one_may_be_is_not_taken_for_dead():
    """A producer that cannot beat for a while (its process compiling the solvers on a cold cache took
    minutes on a loaded machine) is a live thread here: the collector waits for it, never fails the job."""
    from client.config import ClientSettings

    def slow_lines():  # the producer's thread is held here past the stale limit, as a long compile holds it
        time.sleep(1.5)
        yield from LINES[:3]

    with BatchClient(settings=ClientSettings(producer_stale_s=0.3)) as client:
        records = list(client.submit(slow_lines(), escalate_after=0).results(ordered=True))
    assert [r.status for r in records] == ["solved"] * 3


def test_killing_the_pool_returns_though_a_killed_process_held_the_parts_queue():
    """A process killed while sending a part dies holding the queue's write lock: `kill` must not wait on it
    (it put a wake-up there, and a closed stdout hung `solve` one run in six)."""
    import threading

    from client.pool import LocalPool

    pool = LocalPool(1)
    pool.start(warm=lambda: None, races=False)
    pool._parts._wlock.acquire()  # as the killed process left it  # noqa: SLF001
    ended = threading.Event()
    threading.Thread(target=lambda: (pool.kill(), ended.set()), daemon=True).start()
    assert ended.wait(10), "kill waited on the parts queue's lock"
