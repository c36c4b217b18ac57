"""`status` and `collect` tell a user where a job is in words and numbers that agree with each other:
a finished job is done, slow rates keep their digits, stale producer counts never fall below what is
answered, a cancelled job is not offered a resume, and `collect` reports the job's rate."""

from __future__ import annotations

import io
import itertools
import json
import re
import time
from collections.abc import Iterator

import pytest

import client.config
from client.batch import BatchClient
from client.cli import main
from client.config import ClientSettings
from client.plan import ResumeRefused
from client.redis_store import RedisJobStore
from client.store import Checkpoint
from client.transport import Transport
from pipeline.contract.keys import Frontier, JobKeys
from pipeline.contract.tasks import ChunkTask
from pipeline.engine.solve import solve_chunk
from tests.conftest import SAMPLE, chunk_task

LINES = SAMPLE.read_text().splitlines()
JOB = "5a" * 16
URL = "redis://fake:6379/0"
SETTINGS = ClientSettings(max_chunk_bytes=82 * 10, poll_interval=0.01)
pytestmark = pytest.mark.timeout(60)


class Dropped(Transport):
    """Accepts chunk tasks and keeps them (no worker: nothing is solved)."""

    def __init__(self) -> None:
        self.tasks: list[ChunkTask] = []

    def send(self, task: ChunkTask) -> None:
        self.tasks.append(task)


@pytest.fixture
def store(fake_redis, monkeypatch) -> RedisJobStore:
    """The job store `main([... "--broker", URL])` reaches: fakeredis."""
    monkeypatch.setattr(client.config, "connect", lambda url, settings: fake_redis)
    return RedisJobStore(fake_redis, SETTINGS)


def answered(store: RedisJobStore, created: float, meta: dict[str, str], chunks: list[list[str]]) -> None:
    """Create JOB with `meta`, answered chunk by chunk (each chunk ending 10 s after the job was created)."""
    store.create(JOB, {"created": f"{created:.3f}", "inputs": "in.txt", **meta})
    first = 0
    for number, texts in enumerate(chunks):
        result = solve_chunk(chunk_task(JOB, texts, chunk=number, first=first))
        result.header.stats.end = created + 10.0
        store.put_result(JOB, result)
        first += len(texts)


def status_text(capsys) -> str:
    assert main(["status", JOB, "--broker", URL]) == 0
    return capsys.readouterr().out


def test_a_finished_job_is_done_not_produced(store, capsys):
    answered(store, time.time() - 20, {"state": "produced", "total": "5", "chunks_total": "1"}, [LINES[:5]])
    out = status_text(capsys)
    assert out.startswith(f"job {JOB}: done, 5/5 puzzles") and "produced" not in out
    assert main(["status", JOB, "--broker", URL, "--json"]) == 0
    assert '"phase": "done"' in capsys.readouterr().out


def test_a_slow_job_shows_its_rate_with_two_significant_digits_not_zero(store, capsys):
    beat = {"state": "producing", "producer_beat": f"{time.time():.3f}"}  # a live producer: still reading
    answered(store, time.time() - 100, beat, [LINES[:5]])
    line = status_text(capsys).splitlines()[0]
    assert re.search(r", 0\.0[45]\d? puzzles/s", line), line
    assert line.startswith(f"job {JOB}: submitting, ")


def test_stale_producer_counts_never_show_fewer_submitted_than_answered(store, capsys):
    meta = {"state": "producing", "producer_beat": f"{time.time():.3f}", "submitted": "1", "chunks_sent": "0"}
    answered(store, time.time() - 5, meta, [LINES[:3], LINES[3:6]])
    out = status_text(capsys)
    assert f"job {JOB}: submitting, 6/6+ (still reading input)" in out, out
    assert "chunks: 2/2 done" in out


def test_a_cancelled_job_says_cancelled_and_is_not_offered_a_resume(store, tmp_path, monkeypatch, capsys):
    batch = BatchClient(URL, settings=SETTINGS)
    monkeypatch.setattr(batch, "_celery_transport", Dropped)
    job = batch.submit_inputs([("endless", itertools.cycle(LINES[:50]))], bounded=False)
    while job.status().checkpoint < 20:  # it reads, commits and sends on and on
        time.sleep(0.01)
    job.cancel()
    status = job.status()
    assert (status.phase, status.submission) == ("cancelled", "cancelled")
    assert status.error == "the job was cancelled"
    assert main(["status", job.id, "--broker", URL]) == 0
    out = capsys.readouterr().out
    assert f"job {job.id}: cancelled, " in out and "(cancelled)" in out and "resume" not in out
    with pytest.raises(ResumeRefused, match="was cancelled"):
        batch.resume(job.id, [str(tmp_path)])
    args = ["collect", job.id, "--broker", URL, "-o", str(tmp_path / "o.jsonl"), "--timeout", "0.3"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "the job was cancelled" in err and "resume" not in err


def test_collect_reports_the_rate_of_the_job_not_of_the_collection(store, tmp_path, capsys):
    meta = {"state": "produced", "total": "10", "chunks_total": "2"}
    answered(store, time.time() - 3600, meta, [LINES[:5], LINES[5:10]])  # solved in 10 s, an hour ago
    assert main(["collect", JOB, "--broker", URL, "-o", str(tmp_path / "o.jsonl")]) == 0
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("10 puzzles in 10 s (1 puzzles/s)"), first  # as the report writes it


@pytest.fixture(autouse=True)
def _no_broker_env(monkeypatch) -> Iterator[None]:
    monkeypatch.delenv("SUDOKU_BATCH_BROKER", raising=False)
    yield


def test_a_stopped_submission_keeps_the_rate_it_had_and_is_offered_a_resume(store, capsys):
    created = time.time() - 3600  # its producer died an hour ago, 10 s after it started
    meta = {"state": "producing", "producer_beat": f"{created + 10:.3f}", "submitted": "10"}
    meta["checkpoint"] = '{"index": 10, "chunks": 2, "tail": ""}'
    answered(store, created, meta, [LINES[:5], LINES[5:10]])  # both answered 10 s after the start
    out = status_text(capsys)
    assert f"job {JOB}: stopped, 10/10+ (submission stopped) puzzles, 1 puzzles/s" in out, (
        out
    )  # the page's word
    assert f"resume it: sudoku-batch submit --resume {JOB} in.txt" in out


def test_a_producer_that_said_it_left_is_stopped_not_silent_since_1970(store, capsys):
    """An interrupted command sets the beat to 0: that is no time to count a silence from."""
    meta = {"state": "producing", "producer_beat": "0", "checkpoint": '{"index":7,"chunks":1,"tail":"x"}'}
    answered(store, time.time() - 5, meta, [LINES[:7]])
    status = store.status(JOB)
    assert (status.submission, status.producer_silent_s) == ("stopped", None)
    out = status_text(capsys)
    assert "submission incomplete: 7 puzzles submitted, its producer stopped; resume it: " in out, out
    assert "silent" not in out


def test_status_and_the_progress_bar_write_counts_with_separators_and_times_in_their_unit(
    store, monkeypatch, capsys
):
    from client.job import Job
    from client.progress import Progress
    from client.store import JobStatus

    big = JobStatus(
        job=JOB,
        state="producing",
        phase="solving",
        submitted=214200,
        total=214200,
        done=107100,
        counts={"solved": 107100},
        chunks_sent=2142,
        chunks_done=1071,
        rate=25.0,
        eta_s=4284.0,
    )
    monkeypatch.setattr(Job, "status", lambda self: big)
    out = status_text(capsys)
    assert f"job {JOB}: solving, 107,100/214,200 puzzles, 25 puzzles/s, ETA 1 h 11 min" in out, out
    assert "counts: solved 107,100" in out and "chunks: 1,071/2,142 done" in out, out
    stream = io.StringIO()
    bar = Progress(True, stream)
    bar.update(214200, 214200, 214200, force=True)
    assert "] 214,200/214,200 puzzles" in stream.getvalue(), stream.getvalue()


def split_job(store: RedisJobStore, beat: float) -> None:
    """JOB read in 7 splits so far (3.1 MB of a 9.2 MB input), its workers having counted 214,200 puzzles and
    answered 10, its producer's last beat at `beat`."""
    checkpoint = Checkpoint(chunks=7, input=0, offset=3_100_000)
    meta = {"state": "producing", "producer_beat": f"{beat:.3f}", "splits": "/data/big.txt", "submitted": "0"}
    meta.update(
        prints=json.dumps([{"size": 9_200_000, "head": "0" * 32}]), checkpoint=checkpoint.model_dump_json()
    )
    answered(store, time.time() - 20, {**meta, "inputs": "big.txt"}, [LINES[:10]])
    store.r.set(JobKeys(JOB).frontier, Frontier(7, 0, 250_001, 214_200).text())


def test_status_of_a_job_read_in_splits_says_what_was_sent_and_what_the_workers_counted(store, capsys):
    split_job(store, time.time())
    out = status_text(capsys)
    assert f"job {JOB}: submitting, 10/214,200+ (still submitting splits) puzzles" in out, out
    assert "input: submitted 7 splits (3.1 MB of 9.2 MB); 214,200 puzzles counted so far" in out, out


def test_a_stopped_submission_in_splits_is_stopped_in_status_and_interrupts_not_0_puzzles(store, capsys):
    import argparse

    from client.notice import how_far, say_how_to_go_on

    split_job(store, time.time() - 15)  # its producer was killed 15 s ago
    status = store.status(JOB)
    assert (status.phase, status.submission, status.submitted) == ("stopped", "stopped", 214_200)
    out = status_text(capsys)
    assert f"job {JOB}: stopped, 10/214,200+ (submission stopped) puzzles" in out, out
    assert "submission incomplete: 7 splits (3.1 MB of 9.2 MB) submitted, producer silent for 15 s" in out
    job = BatchClient(URL, settings=SETTINGS).job(JOB)
    assert how_far(job, 10) == "10 of 214,200+ puzzles counted so far"
    say_how_to_go_on(job, argparse.Namespace(command="collect", output=None, broker=URL))
    err = capsys.readouterr().err
    assert (
        f"its submission stopped after 7 splits (3.1 MB of 9.2 MB): sudoku-batch submit --resume {JOB}" in err
    )


def test_an_interrupt_counts_what_the_submission_checkpointed_not_its_last_heartbeat(store):
    from client.notice import how_far

    meta = {"state": "producing", "producer_beat": f"{time.time():.3f}", "submitted": "265"}
    meta["checkpoint"] = Checkpoint(index=138_635, chunks=20).model_dump_json()  # beaten after the beat
    answered(store, time.time() - 5, meta, [LINES[:10]])
    assert how_far(BatchClient(URL, settings=SETTINGS).job(JOB), 10) == "10 of 138,635+ puzzles read so far"


def test_collect_of_a_killed_submission_says_what_it_waits_for_then_gives_up_when_the_producer_is_stale(
    store, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("SUDOKU_BATCH_PRODUCER_STALE_S", "9")
    meta = {"state": "producing", "producer_beat": f"{time.time() - 6:.3f}", "inputs": "big.txt"}
    meta["checkpoint"] = Checkpoint(index=10, chunks=1).model_dump_json()  # `submit` killed 6 s ago
    answered(store, time.time() - 7, meta, [LINES[:10]])
    began = time.monotonic()
    assert main(["collect", JOB, "--broker", URL, "-o", str(tmp_path / "out.jsonl"), "-q"]) == 1
    waited = time.monotonic() - began
    err = capsys.readouterr().err.splitlines()
    resume = f"sudoku-batch submit --resume {JOB} big.txt --broker {URL}"
    assert err[0].startswith(
        "waiting: the job's submission stopped after 10 puzzles (its producer silent for 6 s"
    )
    assert err[0].endswith(f"then this gives up in 3 s unless it is resumed: {resume}"), err
    assert err[1].startswith(
        f"sudoku-batch: error: job {JOB}: the producer stopped after submitting 10 puzzles"
    ), err
    assert 2 < waited < 6  # 9 s after the producer's last beat


def test_jobs_prints_a_line_a_job_newest_first_and_json_the_same_statuses(store, capsys):
    answered(store, time.time() - 90, {"state": "produced", "total": "5", "chunks_total": "1"}, [LINES[:5]])
    newer = "6b" * 16
    store.create(newer, {"created": f"{time.time() - 2:.3f}", "state": "producing", "inputs": "big.txt"})
    assert main(["jobs", "--broker", URL]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["JOB", "PHASE", "PROGRESS", "PUZZLES/S", "AGE", "INPUTS"]
    assert lines[1].split()[:3] == [newer, "submitting", "0/0+"] and lines[1].endswith("  big.txt")
    assert lines[2].split()[:3] == [JOB, "done", "5/5"]
    assert "1 min 30 s" in lines[2] or "1 min 31 s" in lines[2]  # 90 s old, plus the solve
    assert len(lines) == 3
    assert main(["jobs", "--broker", URL, "--json", "--limit", "1"]) == 0
    (only,) = json.loads(capsys.readouterr().out)
    assert (only["job"], only["phase"], only["inputs"], only["done"]) == (newer, "submitting", ["big.txt"], 0)
    assert set(only) >= {"created", "rate", "total", "elapsed_s", "state"}


def test_jobs_lists_the_others_when_one_jobs_metadata_is_unreadable_and_says_which_in_one_line(
    store, capsys, caplog
):
    answered(store, time.time() - 90, {"state": "produced", "total": "5", "chunks_total": "1"}, [LINES[:5]])
    broken = "7c" * 16
    store.create(broken, {"created": f"{time.time() - 2:.3f}", "state": "producing", "total": "secret-ish"})
    with caplog.at_level("WARNING", logger="client.store"):
        assert main(["jobs", "--broker", URL]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == [JOB]
    (said,) = [r.getMessage() for r in caplog.records if broken in r.getMessage()]
    assert "unreadable" in said and "secret-ish" not in said


@pytest.mark.parametrize("limit", ["0", "1001"])
def test_jobs_with_a_limit_out_of_bounds_is_a_one_line_usage_error(store, capsys, limit):
    assert main(["jobs", "--broker", URL, "--limit", limit]) == 2
    assert capsys.readouterr().err == f"sudoku-batch: error: --limit {limit}: list 1 to 1000 jobs\n"
    with pytest.raises(ValueError, match="not a whole number from 1 to 1000"):
        BatchClient(URL, settings=SETTINGS).jobs(int(limit))


def test_cancel_of_a_finished_job_changes_nothing_and_says_so_in_one_line(store, capsys):
    answered(store, time.time() - 20, {"state": "produced", "total": "5", "chunks_total": "1"}, [LINES[:5]])
    assert main(["cancel", JOB, "--broker", URL]) == 1
    assert capsys.readouterr().err == f"sudoku-batch: error: job {JOB} is done: nothing to cancel\n"
    assert store.status(JOB).phase == "done"
