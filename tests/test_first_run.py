"""A first run on a machine: the compile is announced only when it happens, `warm` does it ahead,
and `--version` names the installed version. The tests compile into empty numba caches of their own,
or share one (`first_solve`: one cold compile costs 10-20 s)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import tomllib
from pathlib import Path
from subprocess import PIPE
from urllib.request import Request, urlopen

import pytest

from solvers.warm import COMPILE_NOTICE, compile_notice
from tests.conftest import REPO, SAMPLE, cli_command

PUZZLE = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79\n"
STUCK = "12345678." + "........9" + "." * 63  # no solution; stochastic solvers cannot prove it: they go on


def run(*args: str, cache, stdin: str | None = None, env=None) -> subprocess.CompletedProcess[str]:  # noqa: ANN001
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), **(env or {}))
    return subprocess.run(
        [*cli_command(), *args], input=stdin, capture_output=True, text=True, timeout=600, env=env
    )


@pytest.fixture(scope="module")
def first_solve(tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """`solve -` of one puzzle on an empty numba cache: its output, the cache, and a copy of the cache as the
    solve left it. The one cold compile of the solve kernels whose consequences several tests check (a
    compile costs 10-20 s of CPU)."""
    cache = tmp_path_factory.mktemp("numba-cache")
    done = run("solve", "-", cache=cache, stdin=PUZZLE)
    snapshot = tmp_path_factory.mktemp("numba-cache-after-one-solve") / "cache"
    shutil.copytree(cache, snapshot)
    return done, cache, snapshot


@pytest.fixture(scope="module")
def cold_cache(first_solve) -> Path:
    """The numba cache shared by this module's tests, in order (each compiles what it needs), cold but for
    `first_solve`'s compile."""
    return first_solve[1]


@pytest.mark.slow
def test_a_cold_cache_is_announced_once_on_stderr_and_a_warm_one_not_at_all(cold_cache, first_solve):
    first = first_solve[0]
    assert first.returncode == 0, first.stderr
    assert first.stderr.count(COMPILE_NOTICE) == 1 and '"status":"solved"' in first.stdout
    assert f"sudoku-batch: compiling the solvers {COMPILE_NOTICE}" in first.stderr
    second = run("solve", "-", cache=cold_cache, stdin=PUZZLE)
    assert second.returncode == 0 and COMPILE_NOTICE not in second.stderr
    assert run("solve", "-", "-q", cache=cold_cache, stdin=PUZZLE).stderr == ""


@pytest.mark.slow
def test_a_first_generate_after_a_first_solve_says_it_compiles_the_puzzle_generator(cold_cache, tmp_path):
    first = run("generate", "--count", "2", "--seed", "1", cache=cold_cache)
    assert first.returncode == 0, first.stderr
    (line,) = [ln for ln in first.stderr.splitlines() if COMPILE_NOTICE in ln]
    assert line == f"sudoku-batch: compiling the puzzle generator {COMPILE_NOTICE}"
    again = run("generate", "--count", "2", "--seed", "1", cache=cold_cache)
    assert again.returncode == 0 and COMPILE_NOTICE not in again.stderr


UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}


def summary_seconds(stderr: str) -> float:
    """The seconds of the summary's first line (`N puzzles in 2.08 ms (...)`, `in 1 min 5 s (...)`)."""
    (line,) = [ln for ln in stderr.splitlines() if " in " in ln and "puzzles/s" in ln]
    words = line.split(" in ", 1)[1].split(" (", 1)[0].split()
    return sum(float(value) * UNITS[unit] for value, unit in zip(words[::2], words[1::2], strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("first", ["one puzzle", "a file"])
def test_after_a_first_solve_of_either_kind_the_other_compiles_nothing(first, tmp_path, first_solve):
    """The one-puzzle path (in-process) and a file's (local processes) load the same kernels before their
    clock starts: whichever runs first compiles them, once, and its rate leaves the compile out. The
    one-puzzle path's first solve on an empty cache is `first_solve`'s (a copy of the cache it left)."""
    cache = tmp_path / "cache"
    one = (("solve", "-"), PUZZLE)
    whole = (("solve", str(SAMPLE), "-o", str(tmp_path / "out.jsonl")), None)
    (args, stdin), (then, then_stdin) = (one, whole) if first == "one puzzle" else (whole, one)
    if first == "one puzzle":
        done = first_solve[0]
        shutil.copytree(first_solve[2], cache)
    else:
        done = run(*args, cache=cache, stdin=stdin)
    assert done.returncode == 0 and done.stderr.count(COMPILE_NOTICE) == 1, done.stderr
    assert summary_seconds(done.stderr) < 5, done.stderr  # the compile (10 s and more) is not the job's
    after = compiled(cache)
    again = run(*then, cache=cache, stdin=then_stdin)
    assert again.returncode == 0 and COMPILE_NOTICE not in again.stderr, again.stderr
    assert compiled(cache) == after, compiled(cache) - after


@pytest.mark.slow
def test_local_processes_compiling_at_once_say_so_once_and_the_rate_leaves_their_compile_out(
    tmp_path, first_solve
):
    cache = tmp_path / "cache"
    assert first_solve[0].returncode == 0  # the kernels every solve loads, and no others
    shutil.copytree(first_solve[2], cache)
    stuck = tmp_path / "stuck.txt"
    stuck.write_text((STUCK + "\n") * 4)
    env = {"SUDOKU_BATCH_MAX_CHUNK_BYTES": "83"}  # a chunk a puzzle: two processes race (and compile) at once
    args = ("solve", str(stuck), "--portfolio", "annealing", "--time-limit", "1", "--workers", "2")
    done = run(*args, "-o", str(tmp_path / "out.jsonl"), cache=cache, env=env)
    assert done.returncode == 0 and done.stderr.count(COMPILE_NOTICE) == 1, done.stderr
    took = [ln for ln in done.stderr.splitlines() if ln.startswith("compiling the solvers took ")]
    assert len(took) == 1 and took[0].endswith(" s more, not counted above"), done.stderr
    assert summary_seconds(done.stderr) < 4 * 1.0 + 3, done.stderr  # four 1 s races on two processes


@pytest.mark.parametrize(
    ("module", "part"),
    [("solvers.exact.propagation9", "the solvers"), ("solvers.model.parse", "the solvers"),
     ("solvers.generate.dig", "the puzzle generator"), ("solvers.generate.fill", "the puzzle generator"),
     ("pipeline.engine.render.jsonl", "the output writers"), ("", "the solvers")],
)  # fmt: skip
def test_the_compile_notice_names_the_part_whose_kernel_compiles(module, part):
    assert compile_notice(module) == f"compiling {part} {COMPILE_NOTICE}"


def compiled(cache) -> set[str]:
    """The numba cache's files: an index per compiled function, a file per compiled signature."""
    return {str(p.relative_to(cache)) for p in cache.rglob("*") if p.suffix in (".nbi", ".nbc")}


@pytest.mark.slow
def test_warm_compiles_every_kernel_so_solve_race_and_generate_then_compile_nothing(cold_cache, tmp_path):
    warm = run("warm", cache=cold_cache)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout.startswith("solvers compiled for this machine in ") and str(cold_cache) in warm.stdout
    after_warm = compiled(cold_cache)
    grids = tmp_path / "grids.txt"  # a clash (refused by the reader: one puzzle's parse), 16x16, 6x6
    grids.write_text("55" + "." * 79 + "\n" + "." * 256 + "\n" + "." * 36 + "\n")
    big = tmp_path / "big.txt"
    commands = [
        ("solve", str(SAMPLE), str(grids), "--time-limit", "1"),
        ("solve", str(SAMPLE), "--portfolio", "race", "--time-limit", "1"),
        ("generate", "--box", "4x4", "--count", "1", "--seed", "1"),  # one start grid: its own kernel call
        ("generate", "--count", "2", "--seed", "1", "--unique", "--symmetry", "rotational"),
        ("generate", "--box", "5x5", "--count", "1", "--seed", "1", "--holes", "0.6", "-o", str(big)),
        ("solve", str(big), "--portfolio", "race", "--time-limit", "2", "--format", "csv"),
    ]
    for args in commands:
        if "-o" not in args:
            args = (*args, "-o", str(tmp_path / "out"))
        done = run(*args, cache=cold_cache)
        assert done.returncode == 0 and COMPILE_NOTICE not in done.stderr, (args, done.stderr)
        assert compiled(cold_cache) == after_warm, (args, compiled(cold_cache) - after_warm)
    again = run("warm", cache=cold_cache)
    assert again.stdout.startswith("solvers already compiled for this machine: loaded in ")


def race_on_two_workers(cache, tmp_path) -> str:
    """Solve a puzzle with a broker and two workers on `cache`, one racing it as a helper; their logs."""
    from tests.conftest import RedisServer, start_workers, stop_all

    server = RedisServer(tmp_path, appendonly=False)
    server.start()
    stuck = tmp_path / "stuck.txt"
    stuck.write_text(STUCK + "\n")
    args = (
        "--portfolio",
        "annealing",
        "--time-limit",
        "2",
        "--escalate-after",
        "0.2",
        "-o",
        str(tmp_path / "o"),
    )
    try:
        workers = start_workers(server.url, 2, tmp_path, env={"NUMBA_CACHE_DIR": str(cache)})
        try:
            done = run(
                "solve", str(stuck), "--broker", server.url, *args, "-o", str(tmp_path / "o"), cache=cache
            )
            assert done.returncode == 0, done.stderr
        finally:
            stop_all(workers)
    finally:
        server.stop()
    return "".join((tmp_path / f"worker{i}.log").read_text() for i in range(2))


def ask_the_web_page(cache) -> str:
    """Solve a puzzle by race and make a random one through `sudoku-batch serve` on `cache`; its stderr."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        base = f"http://127.0.0.1:{s.getsockname()[1]}"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    serve = subprocess.Popen(
        [*cli_command(), "serve", "--port", base.rsplit(":", 1)[1]], env=env, stderr=PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urlopen(f"{base}/api/samples", timeout=5).read()
                break
            except OSError:
                assert time.monotonic() < deadline and serve.poll() is None
                time.sleep(0.2)
        body = json.dumps({"puzzle": PUZZLE.strip(), "portfolio": "race"}).encode()
        ask = Request(f"{base}/api/solve", body, {"Content-Type": "application/json"})
        assert json.loads(urlopen(ask, timeout=60).read())["status"] == "solved"
        assert json.loads(urlopen(f"{base}/api/random?box=3x3&seed=1", timeout=60).read())["puzzle"]
    finally:
        serve.terminate()
        _, err = serve.communicate(timeout=30)
    return err.decode()


@pytest.mark.slow
@pytest.mark.integration
def test_after_warm_workers_racing_a_puzzle_together_and_the_web_page_compile_nothing(cold_cache, tmp_path):
    assert run("warm", cache=cold_cache).returncode == 0  # warm already when the test before ran
    after_warm = compiled(cold_cache)
    logs = race_on_two_workers(cold_cache, tmp_path)
    assert "sudoku_batch.race_puzzle" in logs and COMPILE_NOTICE not in logs  # a helper raced the puzzle
    assert compiled(cold_cache) == after_warm, compiled(cold_cache) - after_warm
    assert COMPILE_NOTICE not in ask_the_web_page(cold_cache)
    assert compiled(cold_cache) == after_warm, compiled(cold_cache) - after_warm


def test_version_prints_the_version_in_pyproject():
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    proc = subprocess.run([*cli_command(), "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == f"sudoku-batch {version}\n"


@pytest.mark.slow
@pytest.mark.integration
def test_a_worker_starting_on_a_cold_cache_says_so_in_its_log(cold_cache, tmp_path):
    """Cold for the reader's kernels (`solvers.model.parse`: a puzzle's parse and a chunk's, loaded apart as
    it starts): a copy of the module's warm cache without their indexes. The worker compiles them (two and
    more compiles), not every kernel (~30 s of CPU), and says so once."""
    from tests.conftest import RedisServer, start_workers, stop_all

    assert run("warm", cache=cold_cache).returncode == 0  # warm already when the tests before ran
    cache = tmp_path / "cache"
    shutil.copytree(cold_cache, cache)
    cold = list(cache.rglob("parse.*.nbi"))
    assert len(cold) >= 2, cold
    for index in cold:
        index.unlink()
    server = RedisServer(tmp_path, appendonly=False)
    server.start()
    try:
        procs = start_workers(server.url, 1, tmp_path, env={"NUMBA_CACHE_DIR": str(cache)})
        stop_all(procs)
    finally:
        server.stop()
    assert (tmp_path / "worker0.log").read_text().count(COMPILE_NOTICE) == 1
    assert all(index.exists() for index in cold)  # it compiled them again
