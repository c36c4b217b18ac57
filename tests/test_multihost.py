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
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from tests.conftest import CORPORA, SAMPLE, check_records, cli_command

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

    def run(self, ns: str, hostname: str, cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
        """Start `cmd` in namespace `ns` under its own hostname."""
        script = f'hostname {hostname} && exec "$@"'
        full = ["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c", script, "sh", *cmd]
        with open(log, "wb") as out:
            env = dict(os.environ, SUDOKU_BATCH_HEARTBEAT_S="1")
            proc = subprocess.Popen(full, stdout=out, stderr=subprocess.STDOUT, env=env)
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


def test_redis_and_two_workers_on_their_own_hosts_answer_every_puzzle_of_a_job_from_a_third(
    network, tmp_path
):
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
    for i, ns in enumerate(workers, start=1):
        cmd = [*cli_command(), "worker", "--broker", url, "--concurrency", "1", "--loglevel", "info"]
        network.run(ns, f"sb-worker{i}", cmd, tmp_path / f"worker{i}.log")
    deadline = time.monotonic() + 120
    while len(client.zrangebyscore("sbatch:workers", time.time() - 5, "+inf")) < 2:
        logs = "\n".join((tmp_path / f"worker{i}.log").read_text(errors="replace")[-1500:] for i in (1, 2))
        assert time.monotonic() < deadline and all(p.poll() is None for p in network.procs), logs
        time.sleep(0.2)
    hosts = {name.decode().rsplit(":", 1)[0] for name in client.zrange("sbatch:workers", 0, -1)}
    assert hosts == {"sb-worker1", "sb-worker2"}

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
