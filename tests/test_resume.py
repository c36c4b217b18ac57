"""Resuming a submission whose producer died half way (fakeredis and the in-memory store).

The producer commits each chunk with the job's checkpoint before sending it, so a
resume skips exactly what was submitted, numbers chunks on, and every puzzle is
answered once; other inputs, a complete job or a live producer are refused in one line.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

import client.config
from client.batch import BatchClient
from client.cli import main
from client.collector import JobFailed, in_order, stream_chunks
from client.config import ClientSettings
from client.job import Job
from client.memory_store import MemoryStore
from client.plan import JobSpec, ResumeRefused, fingerprint
from client.producer import Producer
from client.redis_store import RedisJobStore
from client.store import Checkpoint, Superseded
from client.transport import Transport
from pipeline.contract.keys import roots_key, workers_key
from pipeline.contract.part import Part
from pipeline.contract.runs import expand_runs
from pipeline.contract.tasks import ChunkTask
from tests.conftest import SAMPLE, failed_chunk

LINES = SAMPLE.read_text().splitlines()
JOB = "5e" * 16
pytestmark = pytest.mark.timeout(60)
SMALL = ClientSettings(max_chunk_bytes=82 * 10, poll_interval=0.01)  # 10 puzzles a chunk


class Killed(BaseException):
    """Stands for SIGKILL: the producer stops dead in the middle of a send."""


class Recorder(Transport):
    """Keeps the tasks it is sent; with `die_at`, that send kills the producer instead."""

    def __init__(self, die_at: int | None = None) -> None:
        self.tasks: list[ChunkTask] = []
        self.die_at = die_at

    def send(self, task: ChunkTask) -> None:
        if self.die_at is not None and len(self.tasks) + 1 == self.die_at:
            raise Killed()
        self.tasks.append(task)


def corpus(seed: int = 3, n: int = 200) -> tuple[list[str], list[str]]:
    """Input lines (puzzles, invalid lines, a comment, a blank) and the puzzles among them, in order."""
    rng = random.Random(seed)
    lines: list[str] = []
    puzzles: list[str] = []
    for text in LINES[:n]:
        if rng.random() < 0.08:
            bad = rng.choice(["not a puzzle", "1" * 81, "12"])
            lines.append(bad)
            puzzles.append(bad)
        if rng.random() < 0.02:
            lines.append(rng.choice(["", "# a comment"]))
        lines.append(text)
        puzzles.append(text)
    return lines, puzzles


@pytest.fixture
def store(fake_redis) -> RedisJobStore:
    """A Redis job store on fakeredis (it keeps the outbox a resume relies on)."""
    return RedisJobStore(fake_redis, SMALL)


def start(store, lines: list[str], die_at: int) -> Recorder:
    """Submit `lines` as JOB with a producer killed at send `die_at`; leave the job as SIGKILL would."""
    spec = JobSpec(JOB, ["a.txt"], prints=[None])
    store.create(JOB, spec.meta())
    transport = Recorder(die_at)
    with pytest.raises(Killed):
        Producer(spec, store, transport, SMALL).run([("a.txt", lines)])
    store.update(JOB, {"state": "producing", "error": "", "producer_beat": str(time.time() - 60)})
    return transport


def resume(store, lines: list[str]) -> Recorder:
    """Resume JOB from its checkpoint with a new producer, as `BatchClient.resume` does."""
    transport = Recorder()
    token = store.claim(JOB)
    checkpoint = Checkpoint.of(store.meta(JOB))
    spec = JobSpec.from_meta(JOB, store.meta(JOB))
    Producer(spec, store, transport, SMALL, resume=checkpoint, token=token).run([("a.txt", lines)])
    return transport


def answer_the_outbox(store) -> list[ChunkTask]:
    """Answer every task kept in the outbox (what workers and the resend sweep do); return them."""
    tasks = [ChunkTask.model_validate_json(payload) for _, payload in store.outbox(JOB).values()]
    for task in tasks:
        store.put_result(JOB, failed_chunk(task, "stand-in answer"))
    return tasks


def collected(store) -> list[dict]:
    """Every record of JOB in input order, as `collect --ordered` writes them."""
    chunks = stream_chunks(store, JOB, result_ttl=60, poll=0.01, idle_timeout=5)
    return [json.loads(line) for result, a, b in in_order(chunks) for line in result.lines()[a:b]]


@pytest.mark.parametrize("die_at", [1, 4, 9])
def test_a_producer_killed_half_way_is_resumed_and_every_puzzle_is_answered_once(store, die_at):
    lines, puzzles = corpus()
    first = start(store, lines, die_at)
    checkpoint = Checkpoint.of(store.meta(JOB))
    assert 0 < checkpoint.index < len(puzzles) and len(first.tasks) == die_at - 1
    second = resume(store, lines)
    tasks = answer_the_outbox(store)
    meta = store.meta(JOB)
    assert meta["state"] == "produced" and int(meta["total"]) == len(puzzles)
    records = collected(store)
    assert [r["index"] for r in records] == list(range(len(puzzles)))
    assert [r["puzzle"] for r in records] == puzzles
    assert [r["line"] for r in records] == [n for n, t in enumerate(lines, 1) if t and t[0] != "#"]
    arrivals = [int(c.split(b":")[0]) for c in store.r.lrange(store.keys(JOB).arrivals, 0, -1)]
    assert sorted(arrivals) == list(range(int(meta["chunks_total"])))  # each chunk id once, none skipped
    assert min(t.chunk for t in second.tasks) >= checkpoint.chunks  # numbering goes on
    unsent = {t.chunk for t in tasks} - {t.chunk for t in first.tasks + second.tasks}
    assert unsent == {checkpoint.chunks - 1}  # committed, then killed before the send: the outbox has it


def test_the_checkpoint_always_names_a_prefix_of_the_input_that_is_fully_submitted():
    lines, _ = corpus(seed=11, n=306)
    lines += ["nonsense"] * 1500 + LINES[:30]  # past MAX_ANSWERED invalid lines in a row

    class Checking(MemoryStore):
        def __init__(self) -> None:
            super().__init__()
            self.covered: set[int] = set()

        def commit(self, job, token, checkpoint, fields=None, answered=None, task=None):
            for part in (answered, task):
                if part is not None:
                    runs = part.header.index_runs if isinstance(part, Part) else part.index_runs
                    self.covered |= set(expand_runs(runs))
            assert self.covered == set(range(checkpoint.index)), checkpoint
            super().commit(job, token, checkpoint, fields, answered, task)

    store = Checking()
    spec = JobSpec(JOB, ["a"])
    store.create(JOB, spec.meta())
    assert Producer(spec, store, Recorder(), SMALL).run([("a", lines)]) == len(store.covered)


def test_a_resume_with_other_puzzles_before_the_checkpoint_is_refused_and_the_job_stays_resumable(store):
    lines, puzzles = corpus()
    start(store, lines, die_at=5)
    before = Checkpoint.of(store.meta(JOB)).index - 1  # the puzzle a resume checks
    other = list(lines)
    other[[n for n, t in enumerate(lines) if t and t[0] != "#"][before]] = LINES[250]
    with pytest.raises(ResumeRefused, match="not the job's inputs"):
        resume(store, other)
    with pytest.raises(ResumeRefused, match="fewer than"):
        resume(store, lines[:10])
    resume(store, lines)
    answer_the_outbox(store)
    assert [r["puzzle"] for r in collected(store)] == puzzles


def test_a_producer_taken_over_by_a_resume_stops_at_its_next_commit_and_does_not_fail_the_job(store):
    spec = JobSpec(JOB, ["a.txt"])
    store.create(JOB, spec.meta())
    old = Producer(spec, store, Recorder(), SMALL)
    old.token = store.claim(JOB)
    store.claim(JOB)  # a resume elsewhere
    with pytest.raises(Superseded):
        old.run([("a.txt", LINES[:50])])
    assert store.meta(JOB)["state"] == "producing" and Checkpoint.of(store.meta(JOB)) == Checkpoint()
    assert store.outbox(JOB) == {}


def test_the_collector_waits_for_an_incomplete_submission_then_says_how_far_it_got(store):
    lines, _ = corpus()
    start(store, lines, die_at=3)
    answer_the_outbox(store)
    with pytest.raises(JobFailed, match="no result arrived"):  # every chunk in, but the input is not
        list(stream_chunks(store, JOB, result_ttl=60, poll=0.01, idle_timeout=0.3))
    done = Checkpoint.of(store.meta(JOB)).index
    with pytest.raises(JobFailed, match=f"stopped after submitting {done} puzzles"):
        list(stream_chunks(store, JOB, result_ttl=60, poll=0.01, stale_after=30))


@pytest.fixture
def broker(fake_redis, monkeypatch) -> tuple[BatchClient, Recorder]:
    """A BatchClient in broker mode on fakeredis, whose chunk tasks go to a Recorder."""
    monkeypatch.setattr(client.config, "connect", lambda url, settings: fake_redis)
    batch = BatchClient("redis://fake:6379/0", settings=SMALL)
    recorder = Recorder()
    monkeypatch.setattr(batch, "_celery_transport", lambda: recorder)
    return batch, recorder


def killed_submission(broker: tuple[BatchClient, Recorder], path: Path, lines: list[str], die_at: int) -> Job:
    """Write `lines` to `path` and submit it through the broker fixture's BatchClient with a
    producer killed at send `die_at`: -> the job, its submission stopped half way."""
    batch, recorder = broker
    path.write_text("\n".join(lines) + "\n")
    recorder.die_at = die_at
    job = batch.submit_inputs([(str(path), str(path))], bounded=False)
    with pytest.raises(Killed):
        job.wait_submitted()
    return job


def test_batch_client_resume_finishes_a_killed_submission_of_files(broker, tmp_path):
    batch, recorder = broker
    lines, puzzles = corpus()
    path = tmp_path / "a.txt"
    job = killed_submission(broker, path, lines, die_at=6)
    store = batch.store
    store.update(job.id, {"state": "producing", "producer_beat": str(time.time() - 60)})
    assert job.status().submission == "stopped" and 0 < job.status().checkpoint < len(puzzles)
    checkpoint = Checkpoint.of(store.meta(job.id))
    recorder.die_at = None
    sent = len(recorder.tasks)
    resumed = batch.resume(job.id, bounded=False)  # the recorded path, reopened
    resumed.wait_submitted()
    assert recorder.tasks[sent].chunk == checkpoint.chunks - 1  # kept, never sent: the resume sends it
    for _, payload in store.outbox(job.id).values():
        store.put_result(job.id, failed_chunk(ChunkTask.model_validate_json(payload), "stand-in"))
    records = [r.to_dict() for r in resumed.results(ordered=True)]
    assert [r["puzzle"] for r in records] == puzzles and [r["index"] for r in records] == list(
        range(len(puzzles))
    )
    assert resumed.status().submission == "complete"


def test_batch_client_resume_refuses_changed_files_a_complete_job_and_a_live_producer(broker, tmp_path):
    batch, recorder = broker
    path = tmp_path / "a.txt"
    job = killed_submission(broker, path, LINES[:100], die_at=2)
    batch.store.update(job.id, {"state": "producing", "producer_beat": str(time.time())})
    with pytest.raises(ResumeRefused, match="may still be running"):
        batch.resume(job.id, bounded=False)
    batch.store.update(job.id, {"producer_beat": str(time.time() - 60)})
    changed = tmp_path / "b.txt"
    changed.write_text("\n".join(LINES[1:101]) + "\n")
    with pytest.raises(ResumeRefused, match="not the input submitted as"):
        batch.resume(job.id, [str(changed)])
    with pytest.raises(ResumeRefused, match="has 1 inputs"):
        batch.resume(job.id, [str(path), str(path)])
    with pytest.raises(ResumeRefused, match="a resume keeps the job's options"):
        batch.resume(job.id, time_limit=3.0)
    with pytest.raises(ResumeRefused, match="no job"):
        batch.resume("ab" * 16)
    recorder.die_at = None
    batch.resume(job.id, [str(path)], bounded=False).wait_submitted()
    with pytest.raises(ResumeRefused, match="submitted completely"):
        batch.resume(job.id)
    assert fingerprint(path) is not None and fingerprint("-") is None


def test_status_says_a_stopped_submission_is_incomplete_and_how_to_resume(broker, tmp_path, capsys):
    path = tmp_path / "my corpus.txt"
    job = killed_submission(broker, path, LINES[:100], die_at=3)
    assert main(["status", job.id, "--broker", "redis://fake:6379/0"]) == 0
    out = capsys.readouterr().out
    assert f"submission incomplete: {job.status().checkpoint} puzzles submitted" in out
    assert f"resume it: sudoku-batch submit --resume {job.id} '{path}' --broker redis://fake:6379/0" in out


def test_submit_resume_refusals_are_one_line_usage_errors(broker, tmp_path, capsys):
    path = tmp_path / "a.txt"
    job = killed_submission(broker, path, LINES[:100], die_at=2)
    other = tmp_path / "b.txt"
    other.write_text(LINES[0] + "\n")
    assert main(["submit", "--resume", job.id, str(other), "--broker", "redis://fake:6379/0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sudoku-batch: error: ") and "not the input submitted" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["submit", "--broker", "redis://fake:6379/0"]) == 2
    assert "needs at least one INPUT" in capsys.readouterr().err


def test_a_resume_claiming_the_job_during_a_commit_voids_that_commit(store, monkeypatch):
    spec = JobSpec(JOB, ["a.txt"])
    store.create(JOB, spec.meta())
    token = store.claim(JOB)
    real = store.r.pipeline

    def racing_pipeline(*args, **kwargs):
        pipe = real(*args, **kwargs)
        multi = pipe.multi

        def claimed_then_multi():
            store.claim(JOB)  # between the token check and EXEC
            multi()

        pipe.multi = claimed_then_multi
        return pipe

    monkeypatch.setattr(store.r, "pipeline", racing_pipeline)
    with pytest.raises(Superseded):
        store.commit(JOB, token, Checkpoint(index=5, chunks=1, tail="x"))
    assert Checkpoint.of(store.meta(JOB)) == Checkpoint()


def test_collect_of_a_stopped_submission_fails_saying_how_to_resume(broker, tmp_path, capsys):
    path = tmp_path / "a.txt"
    job = killed_submission(broker, path, LINES[:100], die_at=3)
    out = tmp_path / "out.jsonl"
    args = ["collect", job.id, "--broker", "redis://fake:6379/0", "-o", str(out), "--timeout", "0.3", "-q"]
    assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and not out.exists()
    assert err.endswith(
        f"resume it: sudoku-batch submit --resume {job.id} {path} --broker redis://fake:6379/0"
    )


@pytest.mark.parametrize("meta", [{}, {"49": "50", "51": "52"}], ids=["unreadable", "garbled"])
def test_an_interrupted_solve_says_how_to_resume_from_its_own_producer_whatever_the_broker_answers(
    broker, tmp_path, capsys, monkeypatch, meta
):
    """The gap redis-py leaves between a command and its reply: interrupted there, the next read may
    get the last command's reply, or fail; the resume command must not depend on it."""
    import argparse

    from client.notice import say_how_to_go_on

    lines, _ = corpus()
    path = tmp_path / "a.txt"
    job = killed_submission(broker, path, lines, die_at=6)
    done = job.stopped_at()
    assert done == Checkpoint.of(broker[0].store.meta(job.id)).index and 0 < done < len(lines)
    monkeypatch.setattr(broker[0].store, "meta", lambda job_id: meta)
    say_how_to_go_on(job, argparse.Namespace(command="solve", output="out.jsonl", broker=None))
    err = capsys.readouterr().err.splitlines()
    resume = f"sudoku-batch submit --resume {job.id} {path}"  # the broker came from the environment
    assert f"its submission stopped after {done:,} puzzles: {resume}" in err
    assert f"collect it: sudoku-batch collect {job.id} -o out.jsonl" in err


def test_a_finished_or_collect_only_job_names_no_stopped_submission(broker, tmp_path):
    batch, _ = broker
    path = tmp_path / "a.txt"
    path.write_text("\n".join(LINES[:30]) + "\n")
    job = batch.submit_inputs([(str(path), str(path))], bounded=False)
    job.wait_submitted()
    assert job.stopped_at() is None and job.submitted_here and job.input_names == [str(path)]
    collecting = batch.job(job.id)
    assert collecting.stopped_at() is None and not collecting.submitted_here


def test_an_interrupted_submission_in_splits_says_how_many_splits_and_bytes_it_sent_not_0_puzzles(
    fake_redis, monkeypatch, tmp_path, capsys
):
    import argparse

    from client.notice import say_how_to_go_on

    monkeypatch.setattr(client.config, "connect", lambda url, settings: fake_redis)
    fake_redis.zadd(workers_key(), {"host:1": time.time()})  # a live worker that reads under tmp_path
    fake_redis.set(roots_key("host:1"), json.dumps([str(tmp_path)]))
    batch = BatchClient("redis://fake:6379/0", settings=ClientSettings(max_split_bytes=820))
    recorder = Recorder(die_at=3)
    monkeypatch.setattr(batch, "_celery_transport", lambda: recorder)
    path = tmp_path / "a.txt"
    path.write_text("\n".join(LINES[:100]) + "\n")
    job = batch.submit_inputs(
        [(str(path), str(path))], bounded=False, format="jsonl", dataset=f"{tmp_path}/out/"
    )
    with pytest.raises(Killed):
        job.wait_submitted()
    checkpoint = Checkpoint.of(batch.store.meta(job.id))  # the third split committed, its send killed
    assert (checkpoint.index, checkpoint.chunks, checkpoint.offset) == (0, 3, 3 * 820)
    assert job.stopped_words() == "3 splits (2.46 kB of 8.2 kB)"
    say_how_to_go_on(job, argparse.Namespace(command="submit", output=None, broker=None))
    assert "its submission stopped after 3 splits (2.46 kB of 8.2 kB): " in capsys.readouterr().err
