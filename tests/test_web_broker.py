"""`serve --broker`: the jobs of a real Redis and its real workers, read and changed through the client."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from client.batch import BatchClient
from client.config import ClientSettings
from client.job import Job, Written
from client.pool import WarmPool
from client.redis_store import RedisJobStore
from pipeline.engine.solve import solve_chunk
from tests.conftest import SAMPLE, chunk_task
from web.app import create_app
from web.backend import Backend
from web.puzzles import samples
from web.settings import ServeSettings

pytestmark = pytest.mark.integration
LINES = SAMPLE.read_text().splitlines()
HARD_25 = next(s.puzzle for s in samples() if s.box == "5x5")


@pytest.fixture(scope="module")
def served(workers: str) -> Iterator[tuple[TestClient, Backend]]:
    backend = Backend(BatchClient(workers, daemon=True), WarmPool(1).fork(), ServeSettings())
    with TestClient(create_app(backend), base_url="http://127.0.0.1") as api:
        yield api, backend
    backend.close()


def keys_of(url: str, job: str) -> list[bytes]:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return list(client.scan_iter(match=f"*{job}*", count=1000))
    finally:
        client.close()


def wait_phase(api: TestClient, job: str, phase: str, timeout: float = 120.0) -> dict:
    deadline, step = time.monotonic() + timeout, 0.005
    data: dict = {}
    while time.monotonic() < deadline:
        data = api.get(f"/api/jobs/{job}").json()
        if data.get("phase") == phase:
            return data
        time.sleep(step)
        step = min(step * 2, 0.2)
    raise AssertionError(f"job {job} never reached {phase}: {data}")


def test_a_job_submitted_elsewhere_is_listed_downloadable_until_collected_and_purged(served, workers):
    api, _ = served
    with BatchClient(workers) as client:
        job = client.submit_inputs([("elsewhere.txt", LINES[:40])], time_limit=5, bounded=False)
        job.wait_submitted()
        data = wait_phase(api, job.id, "done")
        assert data["counts"] == {"solved": 40} and data["name"] == "elsewhere.txt"
        assert data["results"]["state"] == "all" and job.id in [j["job"] for j in api.get("/api/jobs").json()]
        assert len(api.get(f"/api/jobs/{job.id}/results").text.splitlines()) == 40
        assert len(list(job.results(keep=False))) == 40  # a `solve` collects: each result goes once written
    data = api.get(f"/api/jobs/{job.id}").json()
    assert data["results"]["state"] == "gone" and "no longer stored" in data["results"]["note"]
    gone = api.get(f"/api/jobs/{job.id}/results")
    assert gone.status_code == 410 and "collected" in gone.json()["error"]
    assert api.delete(f"/api/jobs/{job.id}").json()["removed"] > 0
    assert keys_of(workers, job.id) in ([], [f"sbatch:job:{job.id}:stop".encode()])  # the stop key expires


def test_an_upload_goes_to_the_workers_and_the_panel_shows_them_solving_it(served, workers):
    api, _ = served
    corpus = "\n".join([HARD_25] * 6).encode()
    params = {"name": "hard.txt", "portfolio": "stochastic", "time_limit": "1"}
    job = api.post("/api/jobs", params=params, content=corpus).json()["job"]
    deadline = time.monotonic() + 60
    seen: set[str] = set()
    while time.monotonic() < deadline and not seen:
        panel = api.get("/api/workers").json()
        seen = {w["name"] for w in panel["workers"] if w["job"] == job}
        time.sleep(0.1)
    assert panel["mode"] == "broker" and len(panel["workers"]) >= 2 and seen
    assert all(w["beat_s"] < 20 for w in panel["workers"])
    data = wait_phase(api, job, "done")
    assert data["counts"] == {"approximate": 6} and set(data["summary"]["approximate_costs"])
    assert "Cost histogram of approximate results" in api.get(f"/jobs/{job}/plots").text
    api.delete(f"/api/jobs/{job}")


def test_a_single_puzzle_through_the_broker_is_a_record_written_by_job_write_leaving_no_job_behind(
    served, workers, monkeypatch
):
    api, backend = served
    before = set(backend.client.store.job_ids(1000))
    written: list[Written] = []
    write = Job.write
    monkeypatch.setattr(Job, "write", lambda *a, **kw: written.append(write(*a, **kw)) or written[-1])
    record = api.post("/api/solve", json={"puzzle": LINES[3], "time_limit": 5}).json()
    assert record["status"] == "solved" and record["input"] == "web" and record["cost"] == 0
    assert [(w.rows, w.complete) for w in written] == [(1, True)]  # the CLI's collection loop, not the page's
    assert set(backend.client.store.job_ids(1000)) <= before


def test_new_solution_through_the_broker_answers_a_grid_not_shown(served, workers):
    api, _ = served
    sparse = next(s.puzzle for s in samples() if "not unique" in s.name)
    shown: list[str] = []
    for seed in (0, 5, 6):
        body = {"puzzle": sparse, "portfolio": "sat", "seed": seed, "time_limit": 5, "exclude": shown}
        record = api.post("/api/solve", json=body).json()
        assert record["status"] == "solved" and record["solution"] not in shown, record
        shown.append(record["solution"])


def test_job_ids_scan_only_job_metadata_keys_and_never_use_keys(fake_redis, monkeypatch):
    settings = ClientSettings()
    store = RedisJobStore(fake_redis, settings)
    jobs = ["0123456789abcdef", "fedcba9876543210", "00000000aaaaaaaa"]
    for job in jobs:
        store.create(job, {"created": "1"})
    fake_redis.set("sbatch:job:not-hex:meta", "x")
    fake_redis.set("sbatch:job:0123456789abcdef:result:0", "x")
    fake_redis.set("other:job:abcdef0123456789:meta", "x")
    monkeypatch.setattr(fake_redis, "keys", lambda *a, **k: pytest.fail("KEYS blocks the broker"))
    assert sorted(store.job_ids(100)) == sorted(jobs)
    assert len(store.job_ids(2)) == 2
    odd = RedisJobStore(fake_redis, ClientSettings(key_prefix="s*b"))
    odd.create("abcdef0123456789", {"created": "1"})
    assert odd.job_ids(100) == ["abcdef0123456789"]  # the prefix's `*` is no wildcard


def test_a_job_whose_producer_died_is_listed_stopped_with_its_resume_command_and_its_rate(
    fake_redis, monkeypatch
):
    import types

    import client.config

    monkeypatch.setattr(client.config, "connect", lambda url, settings: fake_redis)
    backend = Backend(BatchClient("redis://fake:6379/0"), types.SimpleNamespace(), ServeSettings())
    job, created = "5b" * 16, time.time() - 3600  # its producer beat last 10 s after it started
    meta = {"created": f"{created:.3f}", "inputs": "big.txt", "state": "producing", "submitted": "5"}
    meta |= {"producer_beat": f"{created + 10:.3f}", "checkpoint": '{"index": 5, "chunks": 1, "tail": ""}'}
    backend.client.store.create(job, meta)
    result = solve_chunk(chunk_task(job, LINES[:5]))
    result.header.stats.end = created + 10.0
    backend.client.store.put_result(job, result)
    row = backend.job(job)
    assert (row["phase"], row["submission"], row["checkpoint"]) == ("stopped", "stopped", 5)
    assert row["resume"] == f"sudoku-batch submit --resume {job} big.txt --broker URL"
    assert row["rate"] == pytest.approx(0.5, rel=0.01)  # 5 puzzles in its 10 s, not in the hour since
    assert [r["phase"] for r in backend.list_jobs()] == ["stopped"]


def test_a_broker_page_offers_the_priority_classes_normal_first(served):
    api, _ = served
    page = api.get("/jobs").text
    assert '<select id="priority">' in page and '<option value="normal" selected>' in page


def test_a_job_cancelled_elsewhere_is_listed_cancelled_and_what_it_solved_is_downloadable(served, workers):
    api, _ = served
    with BatchClient(workers) as client:
        job = client.submit_inputs([("long.txt", LINES * 400)], time_limit=5, bounded=False)
        job.wait_submitted()
        assert job.cancel()
        data = wait_phase(api, job.id, "cancelled", timeout=30)
        assert job.id in [j["job"] for j in api.get("/api/jobs").json() if j["phase"] == "cancelled"]
        kept = api.get(f"/api/jobs/{job.id}/results")
        assert kept.status_code == 200 and len(kept.text.splitlines()) == sum(data["counts"].values())
        job.purge()
