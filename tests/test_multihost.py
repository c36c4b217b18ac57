"""Multi-host for real: Redis and two workers in their own network namespaces, the client on a third host.

Each namespace is a host with its own address on a bridge (veth pairs) and its own
hostname (UTS namespace); the client runs in the root namespace and must get every
result, answered by both worker hosts. Needs root and `ip netns`: skipped where
namespaces cannot be created, but a failure under CI=true.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from tests.conftest import CORPORA, SAMPLE, check_records, cli_command, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
PASSWORD = "multihost-pw"


def ip(*args: str) -> None:
    """Run `ip ARGS`, raising with its stderr on failure."""
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    if proc.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")


@dataclass
class Network:
    """A bridge in the root namespace (the client host) and one namespace per other host."""

    tag: str
    subnet: str
    namespaces: list[str] = field(default_factory=list)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def bridge(self) -> str:
        return f"sbb{self.tag}"

    def address(self, host: int) -> str:
        return f"{self.subnet}.{host}"

    def up(self) -> None:
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.address(1)}/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")

    def add_host(self, name: str, host: int) -> str:
        """Create namespace `name` with address .host on the bridge; return the namespace name."""
        ns = f"sb{self.tag}{name}"
        ip("netns", "add", ns)
        self.namespaces.append(ns)
        outside, inside = f"sbv{self.tag}{name}", f"sbp{self.tag}{name}"
        ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        ip("link", "set", inside, "netns", ns)
        ip("link", "set", outside, "master", self.bridge)
        ip("link", "set", outside, "up")
        ip("-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", inside)
        ip("-n", ns, "link", "set", inside, "up")
        ip("-n", ns, "link", "set", "lo", "up")
        return ns

    def run(
        self,
        ns: str,
        hostname: str,
        cmd: list[str],
        log: Path,
        hide: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start `cmd` in namespace `ns` under its own hostname; `hide`: a directory this host does not see
        (an empty tmpfs over it in a mount namespace of its own: a shared mount missing on that host)."""
        script = f'hostname {hostname} && exec "$@"'
        unshare = ["unshare", "--uts"]
        if hide is not None:
            script = f"mount -t tmpfs none {hide} && {script}"
            unshare.append("--mount")
        full = ["ip", "netns", "exec", ns, *unshare, "sh", "-c", script, "sh", *cmd]
        with open(log, "wb") as out:
            full_env = dict(os.environ, SUDOKU_BATCH_HEARTBEAT_S="1", **(env or {}))
            proc = subprocess.Popen(full, stdout=out, stderr=subprocess.STDOUT, env=full_env)
        self.procs.append(proc)
        return proc

    def down(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=20)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"network namespaces are needed under CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture
def network(tmp_path: Path) -> Iterator[Network]:
    """A bridge and namespaces that are removed (with their processes) after the test."""
    if shutil.which("ip") is None or shutil.which("unshare") is None or shutil.which("redis-server") is None:
        _unavailable("`ip`, `unshare` or redis-server is missing")
    net = Network(
        tag=f"{os.getpid() % 10000:04d}", subnet=f"10.{random.randint(64, 250)}.{random.randint(1, 250)}"
    )
    try:
        net.up()
        net.add_host("r", 2)
    except (RuntimeError, OSError) as exc:
        net.down()
        _unavailable(f"cannot create network namespaces here: {exc}")
    try:
        yield net
    finally:
        net.down()


def start_cluster(
    network: Network, tmp_path: Path, hide: dict[int, Path] | None = None, env: dict[str, str] | None = None
) -> tuple[str, redis.Redis, list[subprocess.Popen[bytes]]]:
    """Redis on its own host and two worker hosts (`hide`: worker number -> a directory it does not see);
    returns the broker URL, a client of it, and the worker processes, once both beat."""
    redis_ns = network.namespaces[0]
    workers = [network.add_host("w1", 3), network.add_host("w2", 4)]
    host = network.address(2)
    network.run(
        redis_ns,
        "sb-redis",
        ["redis-server", "--bind", host, "--port", "6379", "--requirepass", PASSWORD, "--save", ""]
        + ["--appendonly", "no", "--dir", str(tmp_path)],
        tmp_path / "redis.log",
    )
    url = f"redis://:{PASSWORD}@{host}:6379/0"
    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    deadline = time.monotonic() + 20
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline, (tmp_path / "redis.log").read_text()
            time.sleep(0.1)
    procs = []
    for i, ns in enumerate(workers, start=1):
        cmd = [*cli_command(), "worker", "--broker", url, "--concurrency", "1", "--loglevel", "info"]
        cmd += ["--data-root", str(tmp_path)]  # the shared directory of the tests below is in it
        log = tmp_path / f"worker{i}.log"
        procs.append(network.run(ns, f"sb-worker{i}", cmd, log, (hide or {}).get(i), env))
    deadline = time.monotonic() + 120
    while len(client.zrangebyscore("sbatch:workers", time.time() - 5, "+inf")) < 2:
        logs = "\n".join((tmp_path / f"worker{i}.log").read_text(errors="replace")[-1500:] for i in (1, 2))
        assert time.monotonic() < deadline and all(p.poll() is None for p in network.procs), logs
        time.sleep(0.2)
    hosts = {name.decode().rsplit(":", 1)[0] for name in client.zrange("sbatch:workers", 0, -1)}
    assert hosts == {"sb-worker1", "sb-worker2"}
    return url, client, procs


def test_redis_and_two_workers_on_their_own_hosts_answer_every_puzzle_of_a_job_from_a_third(
    network, tmp_path
):
    url, client, _ = start_cluster(network, tmp_path)

    kaggle = CORPORA / "9x9" / "kaggle_bryanpark_first20000.txt"
    puzzles = (kaggle if kaggle.exists() else SAMPLE).read_text().splitlines()[:3000]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(puzzles) + "\n")
    env = {**os.environ, "SUDOKU_BATCH_MAX_CHUNK_BYTES": str(83 * 60)}  # ~50 chunks: both hosts get work
    submit = subprocess.run(
        [*cli_command(), "submit", str(corpus), "--broker", url],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert submit.returncode == 0, submit.stderr
    job = submit.stdout.strip()
    out = tmp_path / "out.jsonl"
    collect = subprocess.run(
        [
            *cli_command(),
            "collect",
            job,
            "--broker",
            url,
            "-o",
            str(out),
            "--ordered",
            "-q",
            "--timeout",
            "60",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert collect.returncode == 0, collect.stderr
    check_records([json.loads(line) for line in out.read_text().splitlines()], puzzles)
    answered_by = {json.loads(v)["worker"].rsplit(":", 1)[0] for v in client.hvals(f"sbatch:job:{job}:stats")}
    assert answered_by == {"sb-worker1", "sb-worker2"}
    assert PASSWORD not in collect.stderr + submit.stderr
    client.close()


def corpus(tmp: Path, n: int) -> tuple[Path, list[str]]:
    """`n` 9x9 puzzles in a file of directory `tmp`."""
    kaggle = CORPORA / "9x9" / "kaggle_bryanpark_first20000.txt"
    lines = [ln for ln in (kaggle if kaggle.exists() else SAMPLE).read_text().splitlines() if len(ln) == 81]
    puzzles = (lines * (n // len(lines) + 1))[:n]
    path = tmp / "corpus.txt"
    path.write_text("\n".join(puzzles) + "\n")
    return path, puzzles


def dataset_records(root: Path) -> list[dict]:
    """The records of a committed dataset of JSON Lines parts, by index."""
    assert (root / "_SUCCESS").exists(), sorted(os.listdir(root))
    manifest = json.loads((root / "_manifest.json").read_text())
    assert sorted(p["file"] for p in manifest["parts"]) == sorted(p.name for p in root.glob("part-*"))
    records = [json.loads(line) for p in root.glob("part-*") for line in p.read_text().splitlines()]
    return sorted(records, key=lambda r: r["index"])


SMALL_SPLITS = {"SUDOKU_BATCH_MAX_SPLIT_BYTES": str(82 * 60)}  # ~50 splits: both hosts get work


def test_worker_hosts_read_splits_of_a_shared_directory_and_write_the_dataset_there(network, tmp_path):
    shared = tmp_path / "shared"  # every host mounts it at the same path (here: one filesystem)
    shared.mkdir()
    url, client, _ = start_cluster(network, tmp_path)
    path, puzzles = corpus(shared, 3000)
    out = shared / "out"
    solve = subprocess.run(
        [*cli_command(), "solve", str(path), "--broker", url, "-o", f"{out}/", "-q"],
        capture_output=True,
        text=True,
        env={**os.environ, **SMALL_SPLITS},
        timeout=120,
    )
    assert solve.returncode == 0, solve.stderr
    records = dataset_records(out)
    check_records(records, puzzles)
    assert [r["line"] for r in records] == list(range(1, len(puzzles) + 1))
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["options"]["splits"]
    client.close()


def test_a_worker_host_that_cannot_see_the_shared_directory_fails_the_job_in_one_line_naming_it(
    network, tmp_path
):
    shared = tmp_path / "shared"
    shared.mkdir()
    url, client, procs = start_cluster(network, tmp_path, hide={2: shared})
    path, puzzles = corpus(shared, 3000)
    out = shared / "out"
    solve = subprocess.run(
        [*cli_command(), "solve", str(path), "--broker", url, "-o", f"{out}/", "-q"],
        capture_output=True,
        text=True,
        env={**os.environ, **SMALL_SPLITS},
        timeout=120,
    )
    assert solve.returncode == 1, solve.stderr
    (line,) = [ln for ln in solve.stderr.splitlines() if ln.startswith("sudoku-batch: error:")]
    assert "worker sb-worker2:" in line and "cannot see the dataset" in line and str(out) in line, line
    assert not (out / "_SUCCESS").exists()  # no reader takes it for a finished table
    written = [json.loads(x) for p in out.glob("part-*") for x in p.read_text().splitlines()]
    assert len({r["index"] for r in written}) == len(written)  # what was written: each line once
    assert "cannot see the dataset" in (tmp_path / "worker2.log").read_text()
    procs[1].terminate()  # that host stops; the job run again answers every line once, nothing left over
    procs[1].wait(30)
    beats = lambda: client.zrangebyscore("sbatch:workers", time.time() - 2, "+inf")  # noqa: E731
    wait_until(lambda: not any(w.startswith(b"sb-worker2") for w in beats()), 30, "the host's beats 2 s old")
    again = subprocess.run(
        [*cli_command(), "solve", str(path), "--broker", url, "-o", f"{out}/", "-q"],
        capture_output=True,
        text=True,
        env={**os.environ, **SMALL_SPLITS},
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    check_records(dataset_records(out), puzzles)
    client.close()


def test_a_worker_host_killed_mid_part_loses_no_line_and_leaves_no_second_copy(network, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    fast = {"SUDOKU_BATCH_ORPHAN_AFTER_S": "4"}  # a dead host's chunk is put back within seconds
    url, client, procs = start_cluster(network, tmp_path, env=fast)
    path, puzzles = corpus(shared, 6000)
    out = shared / "out"
    env = {
        **os.environ,
        **SMALL_SPLITS,
        "SUDOKU_BATCH_RESEND_AFTER": "3",
        "SUDOKU_BATCH_CHUNK_SECONDS": "0.05",
    }
    solve = subprocess.Popen(
        [*cli_command(), "solve", str(path), "--broker", url, "-o", f"{out}/", "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    victim = procs[0]
    deadline = time.monotonic() + 60
    while True:  # until the victim host is writing parts of a chunk
        running = [k.decode() for k in client.hkeys("sbatch:current")]
        if any(k.startswith("sb-worker1:") for k in running) and list(out.glob("part-*")):
            break
        assert time.monotonic() < deadline and solve.poll() is None, solve.communicate()
        time.sleep(0.005)
    pool = [int(x) for x in Path(f"/proc/{victim.pid}/task/{victim.pid}/children").read_text().split()]
    for pid in [*pool, victim.pid]:  # the host is gone: no goodbye
        os.kill(pid, signal.SIGKILL)
    victim.wait(10)
    _, err = solve.communicate(timeout=150)
    assert solve.returncode == 0, err
    records = dataset_records(out)
    check_records(records, puzzles)
    assert not (out / "_temporary").exists()  # what the killed host left half written went with the commit
    client.close()
