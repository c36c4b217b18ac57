"""Data roots: a worker reads inputs and writes datasets only under the roots its operator gives it.

A queue message is anyone's who holds the Redis password, and a split or dataset task names a
path or URL: unit tests hold the check to its rules (symlinks and `..` resolved, `/data` never
`/data2`, only the roots' protocols, no chained URL); integration tests take a split task from a
real job's outbox, point it elsewhere (a file outside the roots with its size, a symlink, a `..`
escape, a URL of an HTTP server the test runs, a dataset outside) and send it to a real worker:
the job fails in one line naming the worker and the path, the server gets no request, and the
file's content and size reach neither Redis nor any output.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from client.args import UsageError, data_roots
from client.config import ClientSettings
from client.transport import celery_app
from pipeline.contract.outbox import outbox_entry, read_outbox_entry
from pipeline.contract.tasks import VERSION, ChunkTask, Dataset, InputRange
from pipeline.engine.dataset import CLAIM, TEMP_DIR, Claim
from pipeline.engine.roots import DataRoots, OutsideRoots
from pipeline.engine.runner import ListPort, run_chunk
from pipeline.engine.storage import LocalStorage
from tests.conftest import SAMPLE, RedisServer, check_records, run_cli, start_workers, stop_all
from tests.test_dataset import FailingPort

PUZZLES = [ln for ln in SAMPLE.read_text().splitlines() if len(ln) == 81]
SECRET = "roots-secret-marker-7f3a"  # in every file a worker must not read: never in Redis or any output
SIZE = 1_357_913  # bytes of that file: its size never appears either


# ---- the check itself -------------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """`data/` (the root) beside `data2/` and `outside/`, with links from the root to both sides."""
    for name in ("data/sub", "data2", "outside"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "outside" / "secret.txt").write_text(SECRET)
    (tmp_path / "data" / "out-link").symlink_to(tmp_path / "outside")
    (tmp_path / "data" / "in-link").symlink_to(tmp_path / "data" / "sub")
    return tmp_path


def test_a_local_location_is_allowed_only_under_a_root_after_symlinks_and_dotdot_are_resolved(tree):
    roots = DataRoots.parse([str(tree / "data")])
    assert roots.allows(str(tree / "data" / "in.txt")) and roots.allows(str(tree / "data"))
    assert roots.allows(f"file://{tree}/data/in.txt")
    assert roots.allows(str(tree / "data" / "in-link" / "x.txt"))  # a link that stays inside
    assert roots.allows(str(tree / "data" / "sub" / ".." / "x.txt"))
    assert not roots.allows(str(tree / "data" / "out-link" / "secret.txt"))  # a link out of the root
    assert not roots.allows(f"{tree}/data/../outside/secret.txt")
    assert not roots.allows(f"{tree}/data/sub/../../outside/secret.txt")
    assert not roots.allows(f"file://{tree}/outside/secret.txt")
    assert not roots.allows(str(tree / "data2" / "x.txt"))  # `/data` is not a prefix of `/data2`
    assert not roots.allows("/etc/shadow") and not roots.allows("data/in.txt")  # relative: the cwd's


def test_a_root_given_through_a_symlink_or_with_trailing_slashes_is_the_directory_it_names(tree):
    (tree / "alias").symlink_to(tree / "data")
    for given in (f"{tree}/data/", f"{tree}/data//", f"{tree}/alias", f"file://{tree}/data"):
        roots = DataRoots.parse([given])
        assert roots.texts == [str(tree / "data")], given
        assert roots.allows(f"{tree}/data/in.txt") and not roots.allows(f"{tree}/data2/in.txt"), given


def test_a_url_is_allowed_only_under_a_root_of_its_protocol_bucket_and_key_prefix():
    roots = DataRoots.parse(["s3://bucket/jobs/", "gs://other"])
    assert roots.texts == ["s3://bucket/jobs", "gs://other"]
    assert roots.allows("s3://bucket/jobs/in.txt") and roots.allows("s3://bucket/jobs/out/")
    assert roots.allows("s3://bucket/jobs") and roots.allows("gs://other/any/thing.txt")
    assert not roots.allows("s3://bucket/jobs2/in.txt")  # the prefix is whole segments
    assert not roots.allows("s3://bucket2/jobs/in.txt") and not roots.allows("s3://bucket/in.txt")
    assert not roots.allows("gs://bucket/jobs/in.txt") and not roots.allows("s3://other/x")  # protocol
    for escape in (
        "s3://bucket/jobs/../secret",
        "s3://bucket/jobs/%2e%2e/secret",
        "s3://bucket/jobs/./x",
        "s3://bucket/jobs//x",
        "s3://bucket/jobs/a%2f..%2fb",
    ):
        assert not roots.allows(escape), escape


def test_no_other_protocol_passes_unless_a_root_names_it_and_chained_urls_never():
    local = DataRoots.parse(["/"])  # every local path: still no URL
    assert local.allows("/etc/hosts")
    for url in (
        "http://127.0.0.1:8000/x",
        "https://example.org/x",
        "ftp://host/x",
        "memory://x",
        "s3://bucket/x",
        "local:///etc/hosts",
        "FILE:///etc/hosts",
    ):
        assert not local.allows(url), url
    http = DataRoots.parse(["http://127.0.0.1:8000/files"])  # an operator may allow one, prefix-checked
    assert http.allows("http://127.0.0.1:8000/files/a.txt")
    assert not http.allows("http://127.0.0.1:8000/other") and not http.allows("http://127.0.0.1:9000/files/a")
    s3 = DataRoots.parse(["s3://bucket"])
    for chained in (
        "simplecache::s3://bucket/x",
        "s3://bucket/x::http://127.0.0.1/",
        "blockcache::/etc/hosts",
    ):
        assert not s3.allows(chained) and not local.allows(chained), chained
    for bad in ("simplecache::s3://bucket", "s3://bucket/../x", "/data\x00/x"):
        with pytest.raises(ValueError, match="data root"):
            DataRoots.parse([bad])


def test_without_roots_nothing_is_allowed_and_the_refusal_is_one_line_naming_the_path_only():
    none = DataRoots.parse(["", " "])
    assert not none.allows("/tmp/in.txt") and none.texts == []
    with pytest.raises(OutsideRoots) as refused:
        none.check("/tmp/in\nput.txt", "read the input")
    text = str(refused.value)
    assert "\n" not in text and "refuses to read the input /tmp/in\\nput.txt: it has no data roots" in text
    assert "--data-root" in text
    roots = DataRoots.parse(["/data"])
    assert not roots.allows("/data/in\x00.txt")  # refused, never raised from the resolver
    with pytest.raises(OutsideRoots, match=r"outside its data roots \(/data\)"):
        roots.check("/etc/shadow", "read the input")


def test_data_root_options_are_made_absolute_and_replace_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("SUDOKU_BATCH_DATA_ROOTS", "/from/env,s3://bucket")
    assert data_roots(None) == "/from/env,s3://bucket"
    monkeypatch.chdir(tmp_path)
    assert data_roots(["in", "s3://b/p"]) == f"{tmp_path}/in,s3://b/p"
    for bad in (["a,b"], [""], ["s3://b/../x"], ["simplecache::s3://b"]):
        with pytest.raises(UsageError):
            data_roots(bad)
    monkeypatch.setenv("SUDOKU_BATCH_DATA_ROOTS", "s3://b/../x")
    with pytest.raises(UsageError, match="data root"):
        data_roots(None)


def test_a_bad_data_root_stops_the_worker_command_in_one_line_before_it_starts():
    run = run_cli("worker", "--broker", "redis://127.0.0.1:1/0", "--data-root", "s3://bucket/../etc")
    assert run.returncode == 2
    (line,) = run.stderr.splitlines()
    assert line.startswith("sudoku-batch: error: data root s3://bucket/../etc"), line


def split_task(path: Path, size: int, dataset: Path | None = None) -> ChunkTask:
    return ChunkTask(
        job="ab" * 16,
        chunk=0,
        input="in.txt",
        index_runs=[],
        line_runs=[],
        puzzles="",
        split=InputRange(url=str(path), start=0, end=size, size=size),
        dataset=Dataset(url=str(dataset)) if dataset is not None else None,
    )


def test_a_chunk_outside_the_roots_is_refused_before_anything_is_opened_and_fails_the_job(tree, monkeypatch):
    def untouched(*_: Any) -> None:
        raise AssertionError("the storage was used")

    for name in ("size", "open_read", "exists", "put", "listdir", "makedirs"):
        monkeypatch.setattr(LocalStorage, name, untouched)
    roots = DataRoots.parse([str(tree / "data")])
    secret = tree / "outside" / "secret.txt"
    link = tree / "data" / "out-link" / "secret.txt"
    for task, refused in (
        (split_task(secret, len(SECRET), tree / "data" / "out"), f"read the input {secret}"),
        (split_task(link, len(SECRET), tree / "data" / "out"), f"read the input {link}"),
        (
            split_task(tree / "data" / "in.txt", 100, tree / "outside" / "ds"),
            f"write the dataset {tree}/outside",
        ),
    ):
        port = FailingPort()
        assert run_chunk(port, task, roots=roots) == 0
        (reason,) = port.failed
        assert reason.startswith("worker ") and f"refuses to {refused}" in reason, reason
        assert SECRET not in reason and "\n" not in reason and not port.parts


def test_the_users_own_processes_have_no_roots_and_write_a_dataset_anywhere_as_before(tmp_path):
    from client.dataset import claim_directory

    out = tmp_path / "anywhere"
    claim_directory(str(out), Claim(job="cd" * 16, host="test", pid=os.getpid()), lambda held: True)
    task = ChunkTask(
        job="cd" * 16,
        chunk=0,
        input="in.txt",
        index_runs=[(0, 3)],
        line_runs=[(1, 3)],
        puzzles="\n".join(PUZZLES[:3]),
        format="columns",
        dataset=Dataset(url=str(out)),
    )
    assert run_chunk(ListPort(), task) == 3  # roots None: an embedded run, as before
    assert len(list(out.glob("part-*"))) == 1


# ---- crafted messages against a real worker -----------------------------------------------------------


@dataclass
class Fleet:
    """A redis-server of this module and one worker whose data root is `root` (given as the variable)."""

    url: str
    r: redis.Redis
    app: Any
    log: Path
    root: Path
    outside: Path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    base = tmp_path_factory.mktemp("roots")
    root, outside = base / "root", base / "outside"
    root.mkdir()
    outside.mkdir()
    server = RedisServer(tmp_path_factory.mktemp("roots-redis"), appendonly=False)
    server.start()
    logs = tmp_path_factory.mktemp("roots-worker")
    (proc,) = start_workers(server.url, 1, logs, env={"SUDOKU_BATCH_DATA_ROOTS": str(root)})
    app = celery_app(server.url, ClientSettings())
    r = redis.Redis.from_url(server.url)
    try:
        yield Fleet(server.url, r, app, logs / "worker0.log", root, outside)
    finally:
        stop_all([proc])
        app.close()
        r.close()
        server.stop()


def secret_file(path: Path) -> Path:
    """A file of SIZE bytes holding SECRET, a puzzle, and comments."""
    head = f"{SECRET}\n{PUZZLES[0]}\n"
    path.write_text(head + "#" * (SIZE - len(head) - 1) + "\n")
    assert path.stat().st_size == SIZE
    return path


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every GET and HEAD with SECRET, and records the request."""

    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        Recorder.seen.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", str(len(SECRET)))
        self.end_headers()
        self.wfile.write(SECRET.encode())

    do_HEAD = do_GET  # noqa: N815

    def log_message(self, *_: Any) -> None:
        return


@pytest.fixture
def http_server() -> Iterator[str]:
    """A tiny HTTP server on a free loopback port serving SECRET (a stand-in for a metadata service)."""
    Recorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def submit_split_job(fleet: Fleet, name: str, lines: int = 12, split_bytes: int | None = None) -> str:
    """A real dataset job read in splits of `root/NAME.txt` into `root/NAME/`, its messages sent to a queue
    nobody takes: its tasks wait in its outbox for the test to alter and send."""
    path = fleet.root / f"{name}.txt"
    path.write_text("\n".join(PUZZLES[:lines]) + "\n")
    env = {"SUDOKU_BATCH_QUEUE": "sbatch-nobody"}
    if split_bytes is not None:
        env["SUDOKU_BATCH_MAX_SPLIT_BYTES"] = str(split_bytes)
    run = run_cli("submit", str(path), "--broker", fleet.url, "-o", f"{fleet.root / name}/", env=env)
    assert run.returncode == 0 and not run.stderr, run.stderr
    job = run.stdout.strip()
    assert fleet.r.hget(f"sbatch:job:{job}:meta", "splits")  # the worker's root holds it: read in splits
    return job


def alter(fleet: Fleet, job: str, chunk: int, change: Callable[[ChunkTask], dict[str, Any]]) -> ChunkTask:
    """Rewrite chunk `chunk`'s task in the job's outbox (`change`: the fields replaced); return it."""
    key = f"sbatch:job:{job}:outbox"
    task = ChunkTask.model_validate_json(read_outbox_entry(fleet.r.hget(key, str(chunk)))[1])
    task = task.model_copy(update=change(task))
    fleet.r.hset(key, str(chunk), outbox_entry(time.time(), task.model_dump_json()))
    return task


def send(fleet: Fleet, job: str, chunk: int) -> None:
    task = {"v": VERSION, "job": job, "chunk": chunk, "ref": "outbox"}
    fleet.app.send_task("sudoku_batch.solve_chunk", queue="sudoku_batch", kwargs={"task": task})


def failure(fleet: Fleet, job: str, timeout: float = 60) -> str:
    """The job's error once a worker failed it."""
    deadline = time.monotonic() + timeout
    while fleet.r.hget(f"sbatch:job:{job}:meta", "state") != b"failed":
        assert time.monotonic() < deadline, fleet.log.read_text(errors="replace")[-3000:]
        time.sleep(0.05)
    return fleet.r.hget(f"sbatch:job:{job}:meta", "error").decode()


def everything_in_redis(r: redis.Redis, job: str, skip: bytes = b"") -> bytes:
    """Every key and value of job `job` and every key of no job (the queues, the workers' keys) but `skip`, as
    one text to search."""
    out: list[bytes] = []
    for key in r.scan_iter("*"):
        if (
            key == skip
            or key.startswith(b"sbatch:job:")
            and not key.startswith(f"sbatch:job:{job}:".encode())
        ):
            continue
        kind = r.type(key)
        out.append(key)
        if kind == b"string":
            out.append(r.get(key) or b"")
        elif kind == b"hash":
            out += [k + b"=" + v for k, v in r.hgetall(key).items()]
        elif kind == b"list":
            out += r.lrange(key, 0, -1)
        elif kind == b"set":
            out += list(r.smembers(key))
        elif kind == b"zset":
            out += r.zrange(key, 0, -1)
    return b"\n".join(out)


def split_to(url: str, size: int = SIZE) -> Callable[[ChunkTask], dict[str, Any]]:
    return lambda task: {"split": InputRange(url=url, input=0, start=0, end=min(size, 4096), size=size)}


def file_outside(fleet: Fleet, _: str) -> tuple[str, Callable[[ChunkTask], dict[str, Any]]]:
    path = str(secret_file(fleet.outside / "secret.txt"))
    return path, split_to(path)


def file_outside_of_another_size(fleet: Fleet, _: str) -> tuple[str, Callable[[ChunkTask], dict[str, Any]]]:
    path = str(secret_file(fleet.outside / "secret.txt"))
    return path, split_to(path, 4096)  # a size to have the real one said back


def symlink_out_of_the_root(fleet: Fleet, _: str) -> tuple[str, Callable[[ChunkTask], dict[str, Any]]]:
    link = fleet.root / "innocent.txt"
    if not link.is_symlink():
        link.symlink_to(secret_file(fleet.outside / "secret.txt"))
    return str(link), split_to(str(link))


def dotdot_escape(fleet: Fleet, _: str) -> tuple[str, Callable[[ChunkTask], dict[str, Any]]]:
    secret_file(fleet.outside / "secret.txt")
    path = f"{fleet.root}/../outside/secret.txt"
    return path, split_to(path)


def dataset_outside(fleet: Fleet, job: str) -> tuple[str, Callable[[ChunkTask], dict[str, Any]]]:
    from client.dataset import claim_directory

    target = fleet.outside / f"ds-{job}"
    claim = Claim(job=job, host="test", pid=os.getpid())
    claim_directory(str(target), claim, lambda held: True)  # even claimed for the job: not written
    return str(target), lambda task: {"dataset": task.dataset.model_copy(update={"url": str(target)})}  # type: ignore[union-attr]


CASES = [file_outside, file_outside_of_another_size, symlink_out_of_the_root, dotdot_escape, dataset_outside]


def check_refused(fleet: Fleet, job: str, path: str, offset: int, outbox_holds_size: bool) -> None:
    """The job failed in one line naming the worker and `path`; no content or size anywhere."""
    error = failure(fleet, job)
    assert "\n" not in error and error.startswith(f"worker {socket.gethostname()}:"), error
    assert "refuses to " in error and path in error, error
    sizes = [str(SIZE).encode(), f"{SIZE:,}".encode()]
    skip = f"sbatch:job:{job}:outbox".encode() if outbox_holds_size else b""  # the crafted task says it
    stored = everything_in_redis(fleet.r, job, skip)
    assert SECRET.encode() not in stored and not any(s in stored for s in sizes)
    logged = fleet.log.read_bytes()[offset:]
    assert SECRET.encode() not in logged and not any(s in logged for s in sizes)
    written = b"".join(p.read_bytes() for p in fleet.root.rglob("*") if p.is_file() and not p.is_symlink())
    assert SECRET.encode() not in written  # no record of it in any dataset
    collect = run_cli("collect", job, "--broker", fleet.url, "-q", "--timeout", "30", timeout=60)
    assert collect.returncode == 1, collect.stderr
    (line,) = [ln for ln in collect.stderr.splitlines() if ln.startswith("sudoku-batch: error:")]
    assert path in line and "refuses to" in line, collect.stderr
    assert SECRET not in collect.stdout + collect.stderr and str(SIZE) not in collect.stderr
    assert f"{SIZE:,}" not in collect.stderr


@pytest.mark.integration
@pytest.mark.timeout(180)
@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_a_crafted_split_or_dataset_outside_the_roots_fails_the_job_in_one_line_and_leaks_nothing(
    fleet, case
):
    job = submit_split_job(fleet, case.__name__)
    path, change = case(fleet, job)
    alter(fleet, job, 0, change)
    offset = fleet.log.stat().st_size
    send(fleet, job, 0)
    check_refused(fleet, job, path, offset, outbox_holds_size=case is not file_outside_of_another_size)
    if case is dataset_outside:
        assert sorted(os.listdir(Path(path))) == [CLAIM, TEMP_DIR] and not os.listdir(Path(path) / TEMP_DIR)


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_crafted_split_naming_an_http_url_is_refused_and_the_server_gets_no_request(fleet, http_server):
    job = submit_split_job(fleet, "http")
    url = f"{http_server}/latest/meta-data/iam/security-credentials/role"
    alter(fleet, job, 0, split_to(url, len(SECRET)))
    offset = fleet.log.stat().st_size
    send(fleet, job, 0)
    check_refused(fleet, job, url, offset, outbox_holds_size=True)
    assert Recorder.seen == []


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_worker_counting_an_earlier_split_for_its_own_refuses_one_outside_the_roots(fleet):
    job = submit_split_job(fleet, "frontier", lines=40, split_bytes=82 * 10)  # four splits
    path = str(secret_file(fleet.outside / "secret.txt"))
    alter(fleet, job, 0, split_to(path))
    offset = fleet.log.stat().st_size
    send(fleet, job, 1)  # split 0's message never comes: its count is taken by split 1's worker
    check_refused(fleet, job, path, offset, outbox_holds_size=True)


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_an_input_outside_the_workers_roots_is_read_by_the_client_and_every_line_answered(fleet):
    path = fleet.outside / "corpus.txt"
    puzzles = (PUZZLES * 4)[:300]
    path.write_text("\n".join(puzzles) + "\n")
    out = fleet.root / "from-outside"
    run = run_cli("solve", str(path), "--broker", fleet.url, "-o", f"{out}/", "-q")
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines() == [
        f"workers read no files under {fleet.outside}: this machine reads it; start workers with --data-root "
        f"{fleet.outside} to let them read splits"
    ]
    manifest = json.loads((out / "_manifest.json").read_text())
    assert not manifest["options"]["splits"] and manifest["records"] == len(puzzles)
    records = sorted(
        (json.loads(x) for p in out.glob("part-*") for x in p.read_text().splitlines()),
        key=lambda r: r["index"],
    )
    check_records(records, puzzles)


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_dataset_outside_the_live_workers_roots_is_refused_up_front_saying_how_to_allow_it(fleet):
    path = fleet.root / "small.txt"
    path.write_text("\n".join(PUZZLES[:5]) + "\n")
    out = fleet.outside / "not-here"
    before = set(fleet.r.keys("sbatch:job:*"))
    run = run_cli("solve", str(path), "--broker", fleet.url, "-o", f"{out}/")
    assert run.returncode == 2
    (line,) = run.stderr.splitlines()
    assert line.startswith(
        f"sudoku-batch: error: the dataset {out}/ lies outside the data roots of live worker"
    )
    assert f"({fleet.root})" in line and f"--data-root {out}" in line, line
    assert not out.exists() and set(fleet.r.keys("sbatch:job:*")) == before  # nothing made, nothing sent


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_a_worker_without_roots_takes_no_dataset_job_but_answers_every_line_of_a_plain_one(
    tmp_path_factory, tmp_path
):
    server = RedisServer(tmp_path_factory.mktemp("rootless-redis"), appendonly=False)
    server.start()
    logs = tmp_path_factory.mktemp("rootless-worker")
    procs = start_workers(server.url, 1, logs, env={"SUDOKU_BATCH_DATA_ROOTS": ""})
    try:
        assert "no data roots: it reads no split and writes no dataset" in (logs / "worker0.log").read_text()
        path = tmp_path / "in.txt"
        puzzles = PUZZLES[:40]
        path.write_text("\n".join(puzzles) + "\n")
        refused = run_cli("solve", str(path), "--broker", server.url, "-o", f"{tmp_path}/out/")
        assert refused.returncode == 2
        (line,) = refused.stderr.splitlines()
        assert "lies outside the data roots of live worker" in line and "(none)" in line, line
        assert f"--data-root {tmp_path}/out" in line and not (tmp_path / "out").exists()
        out = tmp_path / "out.jsonl"
        run = run_cli("solve", str(path), "--broker", server.url, "-o", str(out), "-q")
        assert run.returncode == 0 and not run.stderr, run.stderr
        check_records([json.loads(x) for x in out.read_text().splitlines()], puzzles)
    finally:
        stop_all(procs)
        server.stop()


def test_published_roots_are_read_bounded_and_anything_but_a_list_of_texts_counts_as_none(fake_redis):
    from client.redis_store import RedisJobStore

    heartbeat = pytest.importorskip("worker.heartbeat")
    heartbeat.beat(fake_redis, "host:1")  # this process's settings: no roots
    assert json.loads(fake_redis.get("sbatch:roots:host:1")) == []
    assert fake_redis.ttl("sbatch:roots:host:1") > 0  # gone with the worker
    now = time.time()
    fake_redis.zadd("sbatch:workers", {"host:2": now, "host:3": now, "host:4": now, "gone:5": now - 3600})
    fake_redis.set("sbatch:roots:host:2", json.dumps(["/data", "s3://bucket"]))
    fake_redis.set("sbatch:roots:host:3", "not json")
    fake_redis.set("sbatch:roots:host:4", json.dumps([1, 2]))
    fake_redis.set("sbatch:roots:gone:5", json.dumps(["/"]))
    published = RedisJobStore(fake_redis, ClientSettings()).worker_roots()
    assert published == {"host:1": [], "host:2": ["/data", "s3://bucket"], "host:3": [], "host:4": []}


def test_with_no_live_worker_the_client_reads_the_inputs_itself_and_says_so(redis_client, tmp_path):
    from client.batch import BatchClient
    from tests.conftest import url_of

    path = tmp_path / "in.txt"
    path.write_text("\n".join(PUZZLES[:5]) + "\n")
    client = BatchClient(url_of(redis_client), settings=ClientSettings(queue="sbatch-nobody"))
    job = client.submit(str(path), dataset=f"{tmp_path}/out/", format="jsonl")
    try:
        job.wait_submitted(30)
        assert job.note == (
            f"workers read no files under {tmp_path}: this machine reads it; start workers with --data-root "
            f"{tmp_path} to let them read splits"
        )
        assert not redis_client.hget(f"sbatch:job:{job.id}:meta", "splits")
    finally:
        job.purge()
        client.close()
