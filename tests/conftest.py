"""Shared fixtures: job stores (in memory, fakeredis, a real redis-server), and real worker processes.

The real redis-server and the `sudoku-batch worker` processes are started once per test
session on a free port in a temporary directory and torn down at the end. Without
redis-server the integration tests skip locally, counted loudly at the end of the run, but
fail when CI=true.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.contract.part import Part
from pipeline.contract.runs import join_texts
from pipeline.contract.tasks import ChunkTask, solver_seed

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "client" / "samples" / "sample.txt"
CORPORA = Path(os.environ.get("SUDOKU_CORPORA") or REPO.parent / "shared" / "corpora")  # shared/ by the repo
NO_REDIS = "redis-server is not installed"
SCREENSHOTS: list[Path] = []  # written by the browser tests, listed at the end of the run
REPORTED_SCREENSHOTS: list[Path] = []  # SCREENSHOTS as the tests' reports carried them (from xdist's workers)


def corpus_file(name: str) -> Path:
    """A file of the shared corpora (`CORPORA`): the test is skipped without it, and fails under CI=true (CI
    has ../shared)."""
    path = CORPORA / name
    if not path.exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{path} is missing, and CI=true has the shared corpora")
        pytest.skip(f"{path} is missing")
    return path


def cli_command() -> list[str]:
    """The `sudoku-batch` command of this interpreter's environment."""
    script = Path(sys.executable).with_name("sudoku-batch")
    return [str(script)] if script.exists() else [sys.executable, "-m", "client.cli"]


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `sudoku-batch ARGS` to completion (this environment plus `env`), its output captured as text."""
    return subprocess.run(
        [*cli_command(), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def job_keys_now(url: str) -> set[bytes]:
    """Every job key in the Redis at `url` now: a test that checks its run cleans up compares with it (the
    session's Redis may hold a stop key of an earlier test's purge for its 60 s)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        return set(client.keys("sbatch:job:*"))
    finally:
        client.close()


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll `condition()` until it returns something truthy and return that; fail naming `what` after
    `timeout` s. The step starts at 5 ms and backs off to 100 ms: a quick event is seen at once, a slow
    one costs little CPU."""
    deadline = time.monotonic() + timeout
    step = 0.005
    while not (value := condition()):
        assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
        time.sleep(step)
        step = min(step * 2, 0.1)
    return value


def free_port() -> int:
    """A TCP port nobody listens on now (the kernel's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def children(pid: int) -> list[int]:
    """The child processes of `pid` (from /proc)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system) process `pid` has used so far, from /proc (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie not yet reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _need_redis() -> str:
    path = shutil.which("redis-server")
    if path is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("redis-server is not installed, and CI=true forbids skipping the integration tests")
        pytest.skip(NO_REDIS)
    return path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Carry the screenshots a test wrote on its report, to the process that prints the run's end (xdist's
    controller under `-n`)."""
    report = (yield).get_result()  # type: ignore[attr-defined]
    if call.when == "teardown":
        report.user_properties.extend(("screenshot", str(path)) for path in SCREENSHOTS)
        SCREENSHOTS.clear()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect the screenshots the reports carry (see `pytest_runtest_makereport`)."""
    REPORTED_SCREENSHOTS.extend(Path(path) for key, path in report.user_properties if key == "screenshot")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """List the browser tests' screenshots; end a run that skipped integration tests for want of
    redis-server with a loud count of them."""
    if REPORTED_SCREENSHOTS:
        terminalreporter.write_sep("-", "screenshots")
        for path in REPORTED_SCREENSHOTS:
            terminalreporter.write_line(str(path))
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if NO_REDIS in str(r.longrepr)]
    if skipped:
        title = f"{len(skipped)} INTEGRATION TESTS SKIPPED: {NO_REDIS}"
        terminalreporter.write_sep("!", title, red=True, bold=True)
        terminalreporter.write_line(
            "They run the pipeline against a real redis-server and worker processes: "
            "`apt-get install redis-server` and run again (with CI=true they fail instead).",
            red=True,
        )


def _stop(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """Terminate a process we started (TERM, then KILL after `grace` seconds)."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server on a free port, without persistence, for the whole session."""
    server = _need_redis()
    workdir = tmp_path_factory.mktemp("redis")
    port = free_port()
    proc = subprocess.Popen(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    import redis

    deadline, step = time.monotonic() + 10, 0.005
    while True:
        try:
            redis.Redis.from_url(url, socket_connect_timeout=0.5).ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline or proc.poll() is not None:
                _stop(proc)
                pytest.fail("redis-server did not start")
            time.sleep(step)
            step = min(step * 2, 0.1)
    yield url
    _stop(proc)


TEST_DB = 1  # a test's own database: the session's `workers` beat and take tasks in database 0


def url_of(client: Any) -> str:
    """The redis:// URL of `client`'s server and database (for commands a test runs against it)."""
    kw = client.connection_pool.connection_kwargs
    return f"redis://{kw['host']}:{kw['port']}/{kw.get('db', 0)}"


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[object]:
    """A client of the session's real redis-server in a database of the test's own (`TEST_DB`, where
    the session's `workers` never beat), flushed before and after the test (later tests must not
    meet its keys)."""
    import redis

    client = redis.Redis.from_url(f"{redis_url.rsplit('/', 1)[0]}/{TEST_DB}")
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.fixture
def fake_redis() -> Iterator[object]:
    """An in-process fake Redis server (fakeredis)."""
    import fakeredis

    client = fakeredis.FakeRedis()
    yield client
    client.flushall()


DATA_ROOTS: list[str] = []  # the tests' workers' data roots: the session's temporary directories


@pytest.fixture(scope="session", autouse=True)
def worker_data_roots(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """What the tests' workers read inputs and write datasets under (`--data-root`): every temporary directory
    of the session (`tmp_path`, `tmp_path_factory.mktemp`), where the tests put their inputs and datasets."""
    DATA_ROOTS[:] = [str(tmp_path_factory.getbasetemp())]
    return DATA_ROOTS


@pytest.fixture(scope="session")
def workers(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Two real `sudoku-batch worker --concurrency 1 --data-root TMP` processes on the session's redis (TMP:
    the session's temporary directories); yields the URL."""
    import redis

    logs = tmp_path_factory.mktemp("workers")
    procs = []
    env = dict(os.environ, SUDOKU_BATCH_HEARTBEAT_S="1")
    roots = [arg for root in DATA_ROOTS for arg in ("--data-root", root)]
    for i in range(2):
        log = open(logs / f"worker{i}.log", "wb")  # noqa: SIM115 - closed at teardown
        cmd = [*cli_command(), "worker", "--broker", redis_url, "--concurrency", "1", "--loglevel", "info"]
        cmd += roots
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO), log))
    client = redis.Redis.from_url(redis_url)
    deadline, step = time.monotonic() + 120, 0.01
    try:
        while len(client.zrangebyscore("sbatch:workers", time.time() - 5, "+inf")) < 2:
            dead = [p for p, _ in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                text = "\n".join(
                    (logs / f"worker{i}.log").read_text(errors="replace")[-2000:] for i in range(2)
                )
                pytest.fail(f"workers did not start:\n{text}")
            time.sleep(step)
            step = min(step * 2, 0.1)
        yield redis_url
    finally:
        for proc, log in procs:
            _stop(proc)
            log.close()
        client.close()


def chunk_task(
    job: str,
    texts: list[str],
    *,
    chunk: int = 0,
    first: int = 0,
    first_line: int | None = None,
    seeded: bool = True,
    **fields: Any,
) -> ChunkTask:
    """A chunk task of `job` holding `texts` as puzzles `first`.. of "in.txt" (lines `first_line`..,
    default first + 1), seeded like the producer seeds chunks unless `seeded` is False (seed 0)."""
    joined, spans = join_texts(texts)
    n = len(texts)
    line = first + 1 if first_line is None else first_line
    return ChunkTask(
        job=job,
        chunk=chunk,
        input="in.txt",
        index_runs=[(first, n)],
        line_runs=[(line, n)],
        puzzles=joined,
        spans=spans,
        seed=solver_seed(job, chunk) if seeded else 0,
        **fields,
    )


def failed_chunk(task: ChunkTask, reason: str, status: str = "error") -> Part:
    """A stand-in answer for a whole chunk (every puzzle `status` with `reason`, unsolved): one part, as a
    worker's `failed_parts` builds it."""
    from pipeline.engine.solve import failed_parts
    from solvers.model.status import Status

    (part,) = failed_parts(task, reason, Status(status), list(range(len(task))))
    return part


def check_records(records: list[dict], puzzles: list[str]) -> None:
    """Assert one record per puzzle, in input order, every `solved` one a verified solution."""
    from solvers.model.parse import parse_puzzle
    from solvers.model.verify import is_solution

    assert [r["puzzle"] for r in records] == puzzles
    assert [r["index"] for r in records] == list(range(len(puzzles)))
    for r in records:
        if r["status"] == "solved":
            assert r["cost"] == 0, r
            puzzle = parse_puzzle(r["puzzle"])
            assert is_solution(puzzle, parse_puzzle(r["solution"], puzzle.box).givens), r
        else:
            assert r["solution"] is None or r["status"] == "approximate", r


class RedisServer:
    """A redis-server of one test (AOF on by default) that can be stopped and restarted on its port."""

    def __init__(self, workdir: Path, *args: str, bind: str = "127.0.0.1", appendonly: bool = True) -> None:
        self.server = _need_redis()
        self.workdir = workdir
        self.bind = bind
        self.port = free_port()
        self.args = ["--appendonly", "yes" if appendonly else "no", "--appendfsync", "always", *args]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The URL without credentials."""
        return f"redis://{self.bind}:{self.port}/0"

    def start(self, password: str | None = None, timeout: float = 10.0) -> None:
        """Start the server and wait until it answers PING."""
        import redis

        cmd = [self.server, "--port", str(self.port), "--bind", self.bind, "--save", ""]
        cmd += ["--dir", str(self.workdir), *self.args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline, step = time.monotonic() + timeout, 0.005
        while True:
            try:
                redis.Redis(
                    host=self.bind, port=self.port, password=password, socket_connect_timeout=0.5
                ).ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    pytest.fail("redis-server did not start")
                time.sleep(step)
                step = min(step * 2, 0.1)

    def stop(self) -> None:
        """Shut the server down (SIGTERM: the AOF is flushed first)."""
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None


def start_workers(
    url: str, count: int, logs: Path, env: dict[str, str] | None = None, args: tuple[str, ...] = ()
) -> list[subprocess.Popen[bytes]]:
    """Start `count` `sudoku-batch worker --concurrency 1 ARGS` processes and wait until each beats; their
    data roots are the session's temporary directories unless `env` sets SUDOKU_BATCH_DATA_ROOTS."""
    import redis

    procs: list[subprocess.Popen[bytes]] = []
    roots = {"SUDOKU_BATCH_DATA_ROOTS": ",".join(DATA_ROOTS)}
    full_env = dict(os.environ, SUDOKU_BATCH_HEARTBEAT_S="1", **{**roots, **(env or {})})
    for i in range(count):
        with open(logs / f"worker{i}.log", "wb") as log:
            cmd = [*cli_command(), "worker", "--broker", url, "--concurrency", "1", "--loglevel", "info"]
            cmd += args
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=full_env, cwd=REPO))
    client = redis.Redis.from_url(url)
    deadline, step = time.monotonic() + 120, 0.01
    try:
        while len(client.zrangebyscore("sbatch:workers", time.time() - 5, "+inf")) < count:
            if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
                text = "\n".join(
                    (logs / f"worker{i}.log").read_text(errors="replace")[-2000:] for i in range(count)
                )
                for proc in procs:
                    _stop(proc)
                pytest.fail(f"workers did not start:\n{text}")
            time.sleep(step)
            step = min(step * 2, 0.1)
    finally:
        client.close()
    return procs


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """Stop processes this test started (TERM, then KILL)."""
    for proc in procs:
        _stop(proc, grace=5.0)
