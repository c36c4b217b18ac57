"""A first run on a machine: the compile is announced only when it happens, `warm` does it ahead,
and `--version` names the installed version. Each test compiles into its own empty numba cache."""

from __future__ import annotations

import os
import subprocess
import tomllib

import pytest

from solvers.warm import COMPILE_NOTICE
from tests.conftest import REPO, SAMPLE, cli_command

PUZZLE = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79\n"


def run(*args: str, cache, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    return subprocess.run(
        [*cli_command(), *args], input=stdin, capture_output=True, text=True, timeout=600, env=env
    )


@pytest.fixture(scope="module")
def cold_cache(tmp_path_factory):
    """An empty numba cache shared by this module's tests, in order (each compiles what it needs)."""
    return tmp_path_factory.mktemp("numba-cache")


@pytest.mark.slow
def test_a_cold_cache_is_announced_once_on_stderr_and_a_warm_one_not_at_all(cold_cache):
    first = run("solve", "-", cache=cold_cache, stdin=PUZZLE)
    assert first.returncode == 0, first.stderr
    assert first.stderr.count(COMPILE_NOTICE) == 1 and '"status":"solved"' in first.stdout
    second = run("solve", "-", cache=cold_cache, stdin=PUZZLE)
    assert second.returncode == 0 and COMPILE_NOTICE not in second.stderr
    assert run("solve", "-", "-q", cache=cold_cache, stdin=PUZZLE).stderr == ""


@pytest.mark.slow
def test_warm_compiles_every_kernel_so_a_race_then_compiles_nothing(cold_cache, tmp_path):
    warm = run("warm", cache=cold_cache)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout.startswith("solvers compiled for this machine in ") and str(cold_cache) in warm.stdout
    race = run("solve", str(SAMPLE), "--portfolio", "race", "--time-limit", "1", "-o", str(tmp_path / "o"),
               cache=cold_cache)  # fmt: skip
    assert race.returncode == 0 and COMPILE_NOTICE not in race.stderr, race.stderr
    again = run("warm", cache=cold_cache)
    assert again.stdout.startswith("solvers already compiled for this machine: loaded in ")


def test_version_prints_the_version_in_pyproject():
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    proc = subprocess.run([*cli_command(), "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == f"sudoku-batch {version}\n"


@pytest.mark.slow
@pytest.mark.integration
def test_a_worker_starting_on_a_cold_cache_says_so_in_its_log(tmp_path):
    from tests.conftest import RedisServer, start_workers, stop_all

    server = RedisServer(tmp_path, appendonly=False)
    server.start()
    try:
        procs = start_workers(server.url, 1, tmp_path, env={"NUMBA_CACHE_DIR": str(tmp_path / "cache")})
        stop_all(procs)
    finally:
        server.stop()
    assert (tmp_path / "worker0.log").read_text().count(COMPILE_NOTICE) == 1
