"""`/metrics` of `serve --broker`: what each metric says for a known fleet, the token, the workers' counts of
dropped messages and escalations, the Grafana dashboard's names, and a real Prometheus scraping it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import types
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from client.batch import BatchClient
from pipeline.engine.solve import solve_chunk
from tests.conftest import REPO, SAMPLE, chunk_task, cli_command, free_port, wait_until
from web.app import create_app
from web.backend import Backend
from web.metrics import FAMILIES, PREFIX, exported_names
from web.settings import ServeSettings

LINES = [ln for ln in SAMPLE.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
PROMETHEUS = "/usr/bin/prometheus"
DASHBOARD = REPO / "deploy" / "grafana" / "sudoku-batch.json"
TOKEN = "a-token-of-twenty-chars"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value of a scrape, parsed by prometheus_client's own parser."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def scrape(api: TestClient, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = api.get("/metrics", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    return samples(answer.text)


def job_id(n: int) -> str:
    return f"{n:02x}" * 16


@pytest.fixture
def fake_backend(fake_redis, monkeypatch) -> Iterator[Backend]:
    """A broker server's backend over fakeredis (no process of its own)."""
    import client.config

    monkeypatch.setattr(client.config, "connect", lambda url, settings: fake_redis)
    backend = Backend(BatchClient("redis://fake:6379/0"), types.SimpleNamespace(), ServeSettings())
    yield backend
    backend.client.close()


def put_part(backend: Backend, job: str, lines: list[str], end: float | None = None) -> None:
    """A part of `lines` solved for `job` (its chunk numbered by the parts there), stored as workers do."""
    chunk = len(backend.client.store.stats(job))
    part = solve_chunk(chunk_task(job, lines, chunk=chunk))
    if end is not None:
        part.header.stats.end = end
    backend.client.store.put_result(job, part)


def test_each_metric_says_what_a_known_fleet_holds(fake_backend, fake_redis):
    store, now = fake_backend.client.store, time.time()
    solving, cancelled, done = job_id(1), job_id(2), job_id(3)
    store.create(
        solving, {"created": f"{now - 60:.3f}", "state": "produced", "total": "9", "cpu_ns": "2500000000"}
    )
    put_part(fake_backend, solving, LINES[:3])  # just now: counted in the rate
    put_part(fake_backend, solving, ["1" * 81], end=now - 600)  # long ago: not in the rate
    store.create(cancelled, {"created": f"{now - 30:.3f}", "state": "producing", "checkpoint": "{}"})
    assert store.cancel(cancelled)
    store.create(done, {"created": f"{now - 90:.3f}", "state": "produced", "total": "2", "cpu_ns": "x"})
    put_part(fake_backend, done, LINES[3:5], end=now - 600)
    fake_redis.zadd("sbatch:workers", {"a:1": now, "a:2": now - 5, "b:7": now, "c:9": now - 3600})
    fake_redis.hset("sbatch:deliveries", mapping={f"{solving}:5": "t|1", f"{solving}:6": "t|1"})
    fake_redis.rpush("sudoku_batch", "m1", "m2", "m3")
    fake_redis.zadd("sbatch:escalations", {f"{solving}:0:1": now + 3, f"{solving}:0:2": now - 1})
    fake_redis.hset("sbatch:dropped", mapping={"refused": 2, "unreadable": 1, "a-stranger's-reason": 9})
    with TestClient(create_app(fake_backend), base_url="http://127.0.0.1") as api:
        got = scrape(api)
    name = PREFIX.__add__
    assert got[(name("chunks_queued"), ())] == 3
    assert got[(name("chunks_in_flight"), ())] == 2
    phases = {dict(labels)["phase"]: v for (n, labels), v in got.items() if n == name("jobs")}
    assert phases == {
        "submitting": 0,
        "stopped": 0,
        "solving": 1,
        "done": 1,
        "failed": 0,
        "cancelled": 1,
        "generating": 0,
        "unknown": 0,
    }
    puzzles = {
        (dict(lb)["job"], dict(lb)["status"]): v for (n, lb), v in got.items() if n == name("puzzles_total")
    }
    assert puzzles == {(solving, "solved"): 3, (solving, "invalid"): 1, (done, "solved"): 2}
    assert got[(name("puzzles_per_second"), ())] == pytest.approx(3 / 30)
    hosts = {dict(lb)["host"]: v for (n, lb), v in got.items() if n == name("worker_processes")}
    assert hosts == {"a": 2, "b": 1}  # c's process has not beaten for an hour
    assert got[(name("escalated_puzzles"), ())] == 1  # the other's lease lapsed
    cpu = {dict(lb)["job"]: v for (n, lb), v in got.items() if n == name("worker_cpu_seconds_total")}
    assert cpu == {solving: 2.5, cancelled: 0, done: 0}  # missing or not a number: 0
    dropped = {dict(lb)["reason"]: v for (n, lb), v in got.items() if n == name("dropped_messages_total")}
    assert dropped["refused"] == 2 and dropped["unreadable"] == 1 and sum(dropped.values()) == 3
    assert (
        name("redis_memory_used_bytes"),
        (),
    ) not in got  # fakeredis has no INFO: left out, said in the log


def test_a_job_cancelled_while_solving_moves_to_the_cancelled_phase_on_the_next_scrape(fake_backend):
    store, job = fake_backend.client.store, job_id(4)
    store.create(job, {"created": f"{time.time():.3f}", "state": "produced", "total": "5"})
    put_part(fake_backend, job, LINES[:2])
    with TestClient(create_app(fake_backend), base_url="http://127.0.0.1") as api:
        before = scrape(api)
        assert store.cancel(job)
        after = scrape(api)
    assert before[(f"{PREFIX}jobs", (("phase", "solving"),))] == 1
    assert after[(f"{PREFIX}jobs", (("phase", "solving"),))] == 0
    assert after[(f"{PREFIX}jobs", (("phase", "cancelled"),))] == 1
    assert (
        after[(f"{PREFIX}puzzles_total", (("job", job), ("status", "solved")))] == 2
    )  # what it solved stays


def test_each_part_is_read_once_and_a_scrape_reads_only_the_parts_that_arrived_since_the_last(
    fake_backend, fake_redis, monkeypatch
):
    import web.metrics

    store, job = fake_backend.client.store, job_id(5)
    store.create(job, {"created": f"{time.time():.3f}", "state": "produced", "total": "9"})
    put_part(fake_backend, job, LINES[:2])
    key = ("sudoku_batch_puzzles_total", (("job", job), ("status", "solved")))
    with TestClient(create_app(fake_backend), base_url="http://127.0.0.1") as api:
        assert scrape(api)[key] == 2
        (field,) = fake_redis.hkeys(f"sbatch:job:{job}:stats")  # the part read already, rewritten: not again
        stats = json.loads(fake_redis.hget(f"sbatch:job:{job}:stats", field))
        fake_redis.hset(f"sbatch:job:{job}:stats", field, json.dumps(stats | {"counts": {"solved": 99}}))
        assert scrape(api)[key] == 2
        put_part(fake_backend, job, LINES[2:3])  # a new part: read, and only it
        assert scrape(api)[key] == 3
        monkeypatch.setattr(web.metrics, "MAX_PARTS_READ", 2)
        for n in range(3, 8):
            put_part(fake_backend, job, LINES[n : n + 1])
        assert scrape(api)[key] == 5  # at most 2 parts of a job a scrape: caught up over the next ones
        assert scrape(api)[key] == 7
        assert scrape(api)[key] == 8


def test_an_embedded_server_answers_metrics_with_404_and_the_reason_in_one_line():
    backend = Backend(BatchClient(None, workers=1), types.SimpleNamespace(), ServeSettings())
    try:
        with TestClient(create_app(backend), base_url="http://127.0.0.1") as api:
            answer = api.get("/metrics")
    finally:
        backend.client.close()
    assert answer.status_code == 404
    assert answer.text.count("\n") == 1 and "--broker URL" in answer.text


def test_metrics_off_loopback_need_the_token_as_the_pages_do(fake_backend):
    settings = ServeSettings(host="0.0.0.0", token=TOKEN)
    with TestClient(create_app(fake_backend, settings), base_url="http://sbatch.example") as api:
        assert api.get("/metrics").status_code == 401
        assert (
            api.get("/metrics", headers={"authorization": "Bearer wrong-token-of-twenty"}).status_code == 401
        )
        assert scrape(api, authorization=f"Bearer {TOKEN}")[(f"{PREFIX}chunks_queued", ())] == 0


def test_an_escalation_counts_while_its_owner_holds_it_and_not_once_closed(fake_backend, fake_redis):
    from worker.board import RedisBoard

    job = job_id(6)
    fake_backend.client.store.create(job, {"created": f"{time.time():.3f}", "state": "produced"})
    board = RedisBoard(fake_redis, job)
    key = (f"{PREFIX}escalated_puzzles", ())
    with TestClient(create_app(fake_backend), base_url="http://127.0.0.1") as api:
        board.open(3, 7)
        board.open(3, 7)  # the owner's refresh: still one puzzle
        board.open(4, 0)
        assert scrape(api)[key] == 2
        board.close(3, 7)
        board.drop(4, 0)
        assert scrape(api)[key] == 0


def test_a_count_of_dropped_messages_under_an_undeclared_reason_is_refused(fake_redis, monkeypatch):
    import worker.envelope

    monkeypatch.setattr(worker.envelope, "store_client", lambda: fake_redis)
    worker.envelope.count_dropped("refused")
    with pytest.raises(ValueError, match="not one of"):
        worker.envelope.count_dropped("whatever a message said")
    assert fake_redis.hgetall("sbatch:dropped") == {b"refused": b"1"}


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_messages_real_workers_drop_are_counted_by_reason(workers):
    import redis

    from tests.test_hostile import GOOD, envelope

    backend = Backend(BatchClient(workers), types.SimpleNamespace(), ServeSettings())
    r = redis.Redis.from_url(workers)
    try:
        with TestClient(create_app(backend), base_url="http://127.0.0.1") as api:

            def dropped() -> dict[str, float]:
                got = scrape(api)
                return {
                    dict(lb)["reason"]: v
                    for (n, lb), v in got.items()
                    if n == f"{PREFIX}dropped_messages_total"
                }

            before = dropped()
            r.lpush("sudoku_batch", "not JSON at all")
            r.lpush("sudoku_batch", json.dumps(envelope(GOOD, task="celery.backend_cleanup")))
            wait_until(
                lambda: (
                    (now := dropped())["unreadable"] == before["unreadable"] + 1
                    and now["refused"] == before["refused"] + 1
                ),
                60,
                "count of both dropped messages",
            )
    finally:
        backend.client.close()
        r.close()


def dashboard_names() -> set[str]:
    """Every metric name the dashboard's queries use (identifiers not followed by `(`, nor label names,
    durations or PromQL keywords)."""
    exprs = [t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p.get("targets", [])]
    assert exprs, "the dashboard has no queries"
    names = set()
    for expr in exprs:
        bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\"[^\"]*\"", "", expr)  # selectors, ranges, strings
        bare = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", bare)
        names |= {m for m in re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b(?!\s*\()", bare) if not m.isdigit()}
    return names


def test_the_grafana_dashboard_queries_only_names_metrics_exports():
    names = dashboard_names()
    assert names <= exported_names(), names - exported_names()
    assert len(names) >= 8  # queue, in flight, rate, phases, workers, CPU, dropped, memory at least
    assert exported_names() == {PREFIX + n for n in FAMILIES}  # declared once: the names the test trusts


def need_prometheus() -> str:
    path = shutil.which("prometheus") or (PROMETHEUS if os.path.exists(PROMETHEUS) else None)
    if path is None:
        reason = "prometheus is not installed (apt-get install prometheus)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}, and CI=true forbids skipping the Prometheus test")
        pytest.skip(reason)
    return path


def test_without_prometheus_the_scrape_test_skips_here_and_fails_under_ci(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(os.path, "exists", lambda path: False)
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="apt-get install prometheus"):
        need_prometheus()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true forbids skipping"):
        need_prometheus()


def prometheus_query(port: int, query: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return json.loads(answer.read())["data"]["result"]
    except OSError:  # not listening yet
        return []


def start_serve(url: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SUDOKU_BATCH_BROKER": url}
    with log.open("wb") as out:
        return subprocess.Popen(
            [*cli_command(), "serve", "--port", str(port), "--workers", "1"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_real_prometheus_scrapes_metrics_and_holds_the_fleets_names(workers, tmp_path):
    binary = need_prometheus()
    serve_port, prom_port = free_port(), free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
        "scrape_configs:\n"
        f"  - {{job_name: sudoku-batch, static_configs: [{{targets: ['127.0.0.1:{serve_port}']}}]}}\n"
    )
    serve = start_serve(workers, serve_port, tmp_path / "serve.log")
    prom = None
    try:
        prom = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / "prometheus.log").open("wb"),
        )
        up = wait_until(
            lambda: [r for r in prometheus_query(prom_port, "up") if r["value"][1] == "1"], 120, "up 1"
        )
        assert up[0]["metric"]["job"] == "sudoku-batch"
        query = 'count by (__name__) ({__name__=~"sudoku_batch_.+"})'
        names = wait_until(
            lambda: len(found := prometheus_query(prom_port, query)) >= 5 and found, 30, "names"
        )
        held = {r["metric"]["__name__"] for r in names}
        assert len(held) >= 5 and held <= exported_names(), held
        (queued,) = prometheus_query(prom_port, "sudoku_batch_chunks_queued")
        assert float(queued["value"][1]) >= 0
    finally:
        for proc in (p for p in (prom, serve) if p is not None):
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
