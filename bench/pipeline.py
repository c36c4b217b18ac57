"""Pipeline overhead, embedded vs broker, its floor, and single-puzzle cold start.

    python bench/pipeline.py [--corpus 9x9/tdoku_puzzles2_17_clue.txt ...] [--format parquet] [--json F]

Overhead = CPU seconds of every process of the pipeline while it solves a corpus
(producer + collector, the two worker processes with their Celery parents, and
redis-server) / CPU seconds of the solver alone on the same puzzles. Two solver
baselines are printed: `solve_many` called directly on the corpus in chunks (same
garbage-collector setting as the workers), and the workers' own in-situ `solve_many`
CPU reported with each chunk. Workers are started and warmed before the clock starts
(long-lived in production), and each corpus runs twice untimed first: this VM charges
~2 ms of CPU per MB the first time a process or the page cache touches memory, which a
long-running deployment has paid long before (a new output file in fresh memory still
pays it: ~45 ms for the 22 MB of the 17-clue records). Interpreter start-up of the client is excluded in the
broker runs and included in the embedded CLI run, which is timed as a user sees it.
The floor is what no glue can avoid (`floor`): reading and checking the input, moving
tasks and packed results through Redis once, rendering and writing the records.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
CORPORA = Path(os.environ.get("SUDOKU_CORPORA") or REPO.parent / "shared" / "corpora")  # shared/ by the repo
SAMPLE = REPO / "client" / "samples" / "sample.txt"
DEFAULT = ["9x9/tdoku_puzzles2_17_clue.txt", "9x9/kaggle_bryanpark_first20000.txt"]
TICK = os.sysconf("SC_CLK_TCK")
CLI = [str(Path(sys.executable).with_name("sudoku-batch"))]


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of one live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def tree(pid: int) -> list[int]:
    """A process and all its live descendants."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(parents.get(p, []))
    return out


def pids_cpu(pids: list[int]) -> float:
    """CPU seconds of the given processes (listed beforehand: walking /proc costs ~10 ms of CPU)."""
    total = 0.0
    for p in pids:
        with contextlib.suppress(OSError):
            total += proc_cpu(p)
    return total


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(port: int, tmp: Path) -> subprocess.Popen:
    """A throwaway redis-server on `port` (no persistence), working in `tmp`."""
    cmd = [
        shutil.which("redis-server") or "redis-server",
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, cwd=tmp)


def baseline(lines: list[str], chunk: int = 10_000) -> float:
    """CPU seconds of `solve_many` alone over the corpus, in chunks, GC paused as in the workers."""
    from solvers.api import solve_many

    solve_many(lines[:100])  # warm
    gc.disable()
    start = time.process_time()
    for i in range(0, len(lines), chunk):
        solve_many(lines[i : i + chunk])
    gc.enable()
    return time.process_time() - start


FORMAT = "jsonl"  # the records' format (`--format`)


@contextlib.contextmanager
def fleet(tmp: Path, name: str) -> Iterator[tuple[str, subprocess.Popen, Any, list[int]]]:
    """A real redis-server and two warm `sudoku-batch worker --concurrency 1` (logs: tmp/<name>worker<i>.log);
    yields the broker URL, the server's process, a redis client and the workers' process ids (long-lived:
    listed once, outside any clock); everything is stopped on the way out."""
    import redis

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    server = start_redis(port, tmp)
    workers: list[subprocess.Popen] = []
    try:
        time.sleep(0.3)
        for i in range(2):
            log = open(tmp / f"{name}worker{i}.log", "wb")  # noqa: SIM115
            cmd = [*CLI, "worker", "--broker", url, "--concurrency", "1"]
            roots = {"SUDOKU_BATCH_DATA_ROOTS": f"{tmp},{CORPORA},{SAMPLE.parent}"}  # the dataset runs' files
            workers.append(
                subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **roots})
            )
        r = redis.Redis.from_url(url)
        while len(r.zrangebyscore("sbatch:workers", time.time() - 10, "+inf")) < 2:
            time.sleep(0.2)
        yield url, server, r, [p for w in workers for p in tree(w.pid)]
    finally:
        for w in workers:
            w.terminate()
        for w in workers:
            w.wait(30)
        server.terminate()
        server.wait(10)


def per_puzzle(small: list[dict], large: list[dict]) -> dict[str, float]:
    """Each role's CPU seconds per puzzle of the larger job minus the smaller, median over the rounds."""
    per = {}
    for role in ("client", "workers", "redis"):
        diffs = [
            (b[role] - a[role]) / (b["puzzles"] - a["puzzles"]) for a, b in zip(small, large, strict=True)
        ]
        per[role] = statistics.median(diffs)
    return per


def run_job(client, path: Path, out: Path) -> dict:
    """Submit and collect one corpus through a BatchClient, writing FORMAT records; return the counters."""
    from client.output import Output
    from client.summary import Summary

    summary = Summary()
    output = Output(str(out), FORMAT)
    job = client.submit(str(path), format=FORMAT)
    n = 0
    for result, start, stop in job.chunks(keep=False):
        output.write(result, start, stop)
        summary.add(result.header.stats, result.header.input)
        n += stop - start
    job.wait_submitted()
    output.close(True)
    summary.finish()
    return {"puzzles": n, "wall_s": summary.wall_s, "solver_cpu_s": summary.solver_cpu_s, "job": job}


def broker_runs(paths: list[Path], tmp: Path, repeat: int = 3) -> dict[str, dict]:
    """Run each corpus through a real redis-server and two warm `sudoku-batch worker --concurrency 1`.

    Each corpus runs `repeat` times back to back and the figures are per run: other processes'
    CPU is read from /proc in 10 ms ticks, too coarse for one run of an easy corpus.
    """

    from client import BatchClient

    with fleet(tmp, "") as (url, server, r, pids):
        client = BatchClient(url)
        run_job(client, SAMPLE, tmp / "warm.jsonl")["job"].purge()  # connections and imports, untimed
        out: dict[str, dict] = {}
        for path in paths:
            for _ in range(2):  # untimed: steady state (memory and page cache this VM has touched before)
                run_job(client, path, tmp / "broker.jsonl")["job"].purge()
            gc.collect()
            workers0, redis0 = pids_cpu(pids), proc_cpu(server.pid)
            cpu0 = time.process_time()
            runs = []
            for _ in range(repeat):
                runs.append(run_job(client, path, tmp / "broker.jsonl"))
                runs[-1]["job"].purge()
            client_cpu = (time.process_time() - cpu0) / repeat
            workers_cpu = (pids_cpu(pids) - workers0) / repeat
            redis_cpu = (proc_cpu(server.pid) - redis0) / repeat
            out[path.name] = {
                "puzzles": runs[0]["puzzles"],
                "wall_s": statistics.mean(r["wall_s"] for r in runs),
                "client_cpu_s": client_cpu,
                "workers_cpu_s": workers_cpu,
                "redis_cpu_s": redis_cpu,
                "total_cpu_s": client_cpu + workers_cpu + redis_cpu,
                "insitu_solver_cpu_s": statistics.mean(r["solver_cpu_s"] for r in runs),
            }
        client.close()
        return out


def embedded_runs(paths: list[Path], tmp: Path, repeat: int = 3) -> dict[str, dict]:
    """Run each corpus embedded (2 local processes, started and warmed first; figures per run of
    `repeat` back to back), and once as a user's CLI run."""
    from client import BatchClient

    out: dict[str, dict] = {}
    with BatchClient(workers=2) as client:
        run_job(client, SAMPLE, tmp / "warm.jsonl")  # starts the pool: untimed, as for the broker's workers
        pids = tree(os.getpid())  # this process and its pool: listed once, outside the clock
        for path in paths:
            for _ in range(2):  # untimed, as for the broker
                run_job(client, path, tmp / "embedded.jsonl")
            gc.collect()
            cpu0 = pids_cpu(pids)
            runs = [run_job(client, path, tmp / "embedded.jsonl") for _ in range(repeat)]
            out[path.name] = {
                "puzzles": runs[0]["puzzles"],
                "wall_s": statistics.mean(r["wall_s"] for r in runs),
                "total_cpu_s": (pids_cpu(pids) - cpu0) / repeat,
                "insitu_solver_cpu_s": statistics.mean(r["solver_cpu_s"] for r in runs),
            }
    for path in paths:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(
            [
                *CLI,
                "solve",
                str(path),
                "-o",
                str(tmp / f"cli.{FORMAT}"),
                "-q",
                "--workers",
                "2",
                "--format",
                FORMAT,
            ],
            check=True,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out[path.name]["cli_wall_s"] = time.perf_counter() - start
        out[path.name]["cli_cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out


def floor(path: Path, tmp: Path, chunk: int = 12_787, repeat: int = 3) -> dict[str, float]:
    """CPU seconds of the parts every run of this pipeline must do beyond solving, without any glue:
    the producer's read and check of the input, the bytes of tasks and packed results through a
    real redis-server (one SET and one GET each: both clients and the server), rendering the
    records, and writing them. Medians of `repeat`; what the overhead targets are held against."""
    import redis

    from client.output import Output
    from client.redis_read import read_large
    from pipeline.contract.part import Part
    from pipeline.contract.tasks import ChunkTask
    from pipeline.engine.reader import read_blocks
    from pipeline.engine.solve import solve_chunk

    lines = path.read_text().splitlines()
    tasks = [
        ChunkTask(job="0" * 8, chunk=k, input=str(path), index_runs=[(i, len(part))],
                  line_runs=[(i + 1, len(part))], puzzles="\n".join(part))
        for k, i in enumerate(range(0, len(lines), chunk)) if (part := lines[i : i + chunk])
    ]  # fmt: skip
    task_bytes = [t.model_dump_json().encode() for t in tasks]
    payloads = [solve_chunk(t).encode() for t in tasks]

    def cpu(fn) -> float:  # noqa: ANN001 - median CPU seconds of fn()
        times = []
        for _ in range(repeat):
            gc.collect()
            start = time.process_time()
            fn()
            times.append(time.process_time() - start)
        return statistics.median(times)

    def read() -> None:
        for _ in read_blocks(str(path)):
            pass

    def render() -> None:
        if FORMAT == "parquet":
            import io

            from pipeline.engine.render.parquet import ParquetSink

            sink = ParquetSink(io.BytesIO())
            for p in payloads:
                result = Part.decode(p)
                sink.write(result, 0, len(result))
            sink.close()
            return
        for p in payloads:
            Part.decode(p).records  # noqa: B018 - rendering is the point

    results = [Part.decode(p) for p in payloads]
    if FORMAT == "parquet":
        import io

        from pipeline.engine.render.parquet import ParquetSink

        memory = io.BytesIO()
        sink = ParquetSink(memory)
        for r in results:
            sink.write(r, 0, len(r))
        sink.close()
        rendered = memory.getvalue()

        def write() -> None:  # the file's bytes alone: rendering them is `render`
            (tmp / "floor.parquet").write_bytes(rendered)

    else:
        for r in results:
            r.records  # noqa: B018 - rendered beforehand: `write` times the file alone

        def write() -> None:  # over the last run's file, as the runs above do
            out = Output(str(tmp / "floor.jsonl"))
            for r in results:
                out.write(r, 0, len(r))
            out.close(True)

    for _ in range(2):  # into page cache freed by earlier runs: writing into never-touched memory of
        write()  # this VM costs ~2 ms per MB more (first touch), which a floor should not count

    port = free_port()
    server = start_redis(port, tmp)
    try:
        time.sleep(0.3)
        client = redis.Redis(port=port)
        client.ping()

        def move(rounds: int = 10) -> float:  # per round: the server's CPU is counted in 10 ms ticks
            server0 = proc_cpu(server.pid)
            start = time.process_time()
            for _ in range(rounds):
                for data in (*task_bytes, *payloads):
                    client.set("floor", data)
                    read_large(client, "floor")  # the collector's fast read (the worker's is slower)
            client.delete("floor")
            time.sleep(0.05)  # let the server's tick counter settle
            return (time.process_time() - start + proc_cpu(server.pid) - server0) / rounds

        moved = statistics.median(move() for _ in range(repeat))
    finally:
        server.terminate()
        server.wait(10)
    return {"read_check_s": cpu(read), "redis_s": moved, "render_s": cpu(render), "write_s": cpu(write)}


def repeated(path: Path, lines: int, tmp: Path) -> Path:
    """The corpus repeated (and cut) to `lines` lines: a job of that size with the corpus's puzzles."""
    out = tmp / f"{path.stem}.{lines}.txt"
    if not out.exists():
        text = path.read_text().splitlines()
        with open(out, "w") as f:
            for i in range(lines):
                f.write(text[i % len(text)] + "\n")
    return out


def marginal_runs(paths: list[Path], tmp: Path, formats: list[str], rounds: int = 3) -> dict[str, dict]:
    """Per role (client, workers, redis-server) CPU seconds per puzzle of a 1M-line job minus a 100k one,
    through a real redis-server and two warm workers, for each corpus and format; medians of `rounds`
    interleaved rounds. Redis's peak memory (used_memory, polled every 20 ms) is kept per run."""
    import threading

    from client import BatchClient

    global FORMAT
    with fleet(tmp, "m") as (url, server, r, pids):
        client = BatchClient(url)
        run_job(client, SAMPLE, tmp / "warm.jsonl")["job"].purge()
        sizes = (100_000, 1_000_000)
        figures: dict[str, dict[str, list[dict]]] = {}
        for _ in range(rounds):
            for path in paths:
                for fmt in formats:
                    FORMAT = fmt
                    for size in sizes:
                        corpus = repeated(path, size, tmp)
                        peak = [0]
                        done = threading.Event()

                        watcher = threading.Thread(target=_poll_memory, args=(r, peak, done), daemon=True)
                        gc.collect()
                        workers0, redis0, cpu0 = pids_cpu(pids), proc_cpu(server.pid), time.process_time()
                        watcher.start()
                        run = run_job(client, corpus, tmp / f"marginal.{fmt}")
                        client_cpu = time.process_time() - cpu0
                        time.sleep(0.05)
                        done.set()
                        watcher.join()
                        row = {
                            "puzzles": run["puzzles"], "client": client_cpu,
                            "workers": pids_cpu(pids) - workers0, "redis": proc_cpu(server.pid) - redis0,
                            "redis_peak_mb": peak[0] / 1e6,
                            "wall_s": run["wall_s"],
                        }  # fmt: skip
                        run["job"].purge()
                        figures.setdefault(f"{path.name} {fmt}", {}).setdefault(str(size), []).append(row)
        client.close()
    out: dict[str, dict] = {}
    for key, by_size in figures.items():
        small, large = by_size["100000"], by_size["1000000"]
        per = per_puzzle(small, large)
        out[key] = {
            "per_puzzle_us": {k: v * 1e6 for k, v in per.items()},
            "workers_over_client": per["workers"] / per["client"] if per["client"] > 0 else float("inf"),
            "workers_over_redis": per["workers"] / per["redis"] if per["redis"] > 0 else float("inf"),
            "redis_peak_mb_1m": max(b["redis_peak_mb"] for b in large),
            "runs": by_size,
        }
    return out


def run_dataset_job(client, path: Path, out: Path, fmt: str) -> dict:  # noqa: ANN001 - a BatchClient
    """Submit one corpus as a dataset job read in splits (`solve corpus -o DIR/ --broker`) and collect it as
    `client.run` does: take each part's header, acknowledge the parts every `ack_s`, commit the manifest."""
    from client.dataset import DatasetOutput
    from client.summary import Summary

    summary = Summary()
    job = client.submit(str(path), format=fmt, dataset=str(out) + "/", splits=True)
    meta = client.store.meta(job.id)
    output = DatasetOutput(meta["dataset"], fmt, job.id, meta, summary)
    n, pending, acked = 0, [], time.monotonic()
    for result, start, stop in job.chunks(keep=True, acked=True):
        output.write(result, start, stop)
        summary.add(result.header.stats, result.header.input)
        n += stop - start
        pending.append(result.part)
        if time.monotonic() - acked >= client.settings.ack_s:
            client.store.ack(job.id, pending, output.durable())
            pending, acked = [], time.monotonic()
    job.wait_submitted()
    client.store.ack(job.id, pending, output.durable())
    manifest = output.commit()
    summary.finish()
    assert manifest.records == n, (manifest.records, n)
    return {"puzzles": n, "wall_s": summary.wall_s, "solver_cpu_s": summary.solver_cpu_s, "job": job}


def dataset_runs(
    paths: list[Path],
    tmp: Path,
    formats: list[str],
    rounds: int = 3,
    sizes: tuple[int, ...] = (100_000, 1_000_000),
) -> dict[str, dict]:
    """Per role CPU seconds per puzzle of a dataset job read in splits (the workers read the input and write
    the parts; the client and Redis only coordinate): a 1M-line job minus a 100k one, through a real
    redis-server and two warm workers, medians of `rounds` interleaved rounds. Redis's peak memory and the
    client's peak RSS are measured in separate runs (a poller costs both some CPU)."""

    from client import BatchClient

    with fleet(tmp, "d") as (url, server, r, pids):
        client = BatchClient(url)
        run_dataset_job(client, SAMPLE, tmp / "warm-ds", "jsonl")["job"].purge()
        figures: dict[str, dict[str, list[dict]]] = {}
        for _ in range(rounds):
            for path in paths:
                for fmt in formats:
                    for size in sizes:
                        corpus = repeated(path, size, tmp)
                        gc.collect()
                        calls0 = redis_calls(r)
                        workers0, redis0, cpu0 = pids_cpu(pids), proc_cpu(server.pid), time.process_time()
                        run = run_dataset_job(client, corpus, tmp / f"ds-{fmt}", fmt)
                        client_cpu = time.process_time() - cpu0
                        time.sleep(0.05)
                        manifest = json.loads((tmp / f"ds-{fmt}" / "_manifest.json").read_text())
                        row = {
                            "puzzles": run["puzzles"], "client": client_cpu,
                            "workers": pids_cpu(pids) - workers0, "redis": proc_cpu(server.pid) - redis0,
                            "wall_s": run["wall_s"], "redis_calls": redis_calls(r) - calls0 - 2,
                            "chunks": len({p["chunk"] for p in manifest["parts"]}),
                            "parts": len(manifest["parts"]),
                            "bytes": sum(p["bytes"] for p in manifest["parts"]),
                        }  # fmt: skip
                        run["job"].purge()
                        figures.setdefault(f"{path.name} {fmt}", {}).setdefault(str(size), []).append(row)
        client.close()
    out: dict[str, dict] = {}
    for key, by_size in figures.items():
        small, large = by_size[str(sizes[0])], by_size[str(sizes[-1])]
        per = per_puzzle(small, large)
        big = large[0]
        out[key] = {
            "per_puzzle_us": {k: v * 1e6 for k, v in per.items()},
            "workers_over_client": per["workers"] / per["client"] if per["client"] > 0 else float("inf"),
            "workers_over_redis": per["workers"] / per["redis"] if per["redis"] > 0 else float("inf"),
            "redis_calls_per_chunk": statistics.median(b["redis_calls"] / b["chunks"] for b in large),
            "bytes_per_record": big["bytes"] / big["puzzles"],
            "puzzles_per_chunk": big["puzzles"] / big["chunks"],
            "runs": by_size,
        }
    return out


def redis_calls(client) -> int:  # noqa: ANN001 - a redis client
    """Commands the server has run so far (INFO commandstats), this call's two included."""
    return sum(int(v["calls"]) for v in client.info("commandstats").values())


def _dataset_format(fmt: str) -> object:
    """How pyarrow.dataset reads a dataset of `fmt`: JSON Lines by the record schema, counters left out (by
    inference pyarrow 26 hung reading a 50,000-line JSON Lines dataset of 7 parts)."""
    if fmt != "jsonl":
        return fmt
    import pyarrow.dataset as ds

    from solvers.model.frame import jsonl_options

    return ds.JsonFileFormat(parse_options=jsonl_options())


def big_dataset_run(path: Path, lines: int, tmp: Path, fmt: str = "parquet") -> dict:
    """One `sudoku-batch solve BIG -o DIR/ --broker` of `lines` lines with two warm workers, as a user runs
    it: the command's peak RSS (wait4), Redis's peak used_memory (polled every 50 ms from here), and
    the dataset read back: every line once (pyarrow.dataset, the index and line columns)."""
    import threading

    import pyarrow.dataset as ds

    corpus = repeated(path, lines, tmp)
    with fleet(tmp, "b") as (url, server, r, pids):
        peak, done = [0], threading.Event()
        watcher = threading.Thread(target=_poll_memory, args=(r, peak, done, 0.05), daemon=True)
        watcher.start()
        out = tmp / "big"
        start = time.perf_counter()
        proc = subprocess.Popen(
            [*CLI, "solve", str(corpus), "--broker", url, "-o", f"{out}/", "-q", "--format", fmt]
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        done.set()
        watcher.join()
        if status:
            raise RuntimeError(f"solve exited {status}")
        dataset = ds.dataset(str(out), format=_dataset_format(fmt))
        table = dataset.to_table(columns=["index", "line"])
        index = table.column("index").to_numpy()
        line = table.column("line").to_numpy()
        import numpy as np

        once = len(index) == lines and np.array_equal(np.sort(index), np.arange(lines))
        once = once and np.array_equal(np.sort(line), np.arange(1, lines + 1))
        return {
            "lines": lines, "wall_s": wall, "client_peak_rss_mb": usage.ru_maxrss / 1024,
            "client_cpu_s": usage.ru_utime + usage.ru_stime, "redis_peak_mb": peak[0] / 1e6,
            "every_line_once": bool(once), "parts": len(list(out.glob("part-*"))),
        }  # fmt: skip


def _poll_memory(client, peak: list[int], done, every: float = 0.02) -> None:  # noqa: ANN001 - redis, Event
    """Keep Redis's highest used_memory in peak[0] until `done` is set."""
    while not done.wait(every):
        peak[0] = max(peak[0], int(client.info("memory")["used_memory"]))


def cold_start(puzzle: str, runs: int = 5) -> list[float]:
    """Wall seconds of `echo PUZZLE | sudoku-batch solve -`, from a fresh interpreter each time."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            [*CLI, "solve", "-", "-q"], input=puzzle + "\n", capture_output=True, text=True, check=True
        )
        times.append(time.perf_counter() - start)
    return times


def save(report: dict[str, object], path: str | None, **figures: object) -> None:
    """Add `figures` and the load after the runs to `report`; write it as JSON to `path` if one was given."""
    report.update(figures, load_after=os.getloadavg())
    if path:
        Path(path).write_text(json.dumps(report, indent=2, default=str))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", action="append", help="corpus under shared/corpora (repeatable)")
    ap.add_argument("--no-broker", action="store_true", help="skip the redis-server runs")
    ap.add_argument("--no-embedded", action="store_true", help="skip the embedded runs")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each corpus per figure (default 3)")
    ap.add_argument("--no-floor", action="store_true", help="skip the floor (the parts no glue can avoid)")
    ap.add_argument(
        "--format", choices=("jsonl", "csv", "parquet"), default="jsonl", help="the records' format"
    )
    ap.add_argument(
        "--marginal", action="store_true",
        help="only the fan-in: per role CPU per puzzle of a 1M-line job minus a 100k one, every format",
    )  # fmt: skip
    ap.add_argument("--rounds", type=int, default=3, help="--marginal: interleaved rounds (medians)")
    ap.add_argument(
        "--big", type=int, default=0, metavar="N",
        help="one N-line dataset job as a user runs it: its peak RSS, Redis's peak memory, every line once",
    )  # fmt: skip
    ap.add_argument(
        "--dataset", action="store_true",
        help="only the fan-in of dataset jobs read in splits (workers read and write; client and Redis "
        "coordinate): per role CPU per puzzle of a 1M-line job minus a 100k one",
    )  # fmt: skip
    ap.add_argument("--no-cold", action="store_true", help="skip the one-puzzle cold starts")
    args = ap.parse_args()
    global FORMAT
    FORMAT = args.format
    paths = [CORPORA / c for c in (args.corpus or DEFAULT)]
    report: dict[str, object] = {"cpus": os.cpu_count(), "load_before": os.getloadavg()}
    if args.big:
        with tempfile.TemporaryDirectory() as tmpdir:
            big = big_dataset_run(paths[0], args.big, Path(tmpdir), args.format)
        print(
            f"{big['lines']:,} lines to a dataset: wall {big['wall_s']:.1f} s, client peak RSS "
            f"{big['client_peak_rss_mb']:.0f} MB, CPU {big['client_cpu_s']:.2f} s; Redis peak "
            f"{big['redis_peak_mb']:.1f} MB; {big['parts']} parts; every line once: {big['every_line_once']}"
        )
        save(report, args.json, big=big)
        return
    if args.dataset:
        with tempfile.TemporaryDirectory() as tmpdir:
            figures = dataset_runs(paths, Path(tmpdir), [args.format], args.rounds)
        for key, data in figures.items():
            us = data["per_puzzle_us"]
            print(
                f"{key:40s} dataset per puzzle: client {us['client']:.3f} us, workers "
                f"{us['workers']:.2f} us, "
                f"redis {us['redis']:.3f} us; workers/client x{data['workers_over_client']:.0f}, "
                f"workers/redis x{data['workers_over_redis']:.0f}; Redis calls a chunk "
                f"{data['redis_calls_per_chunk']:.0f}, {data['puzzles_per_chunk']:,.0f} puzzles a chunk, "
                f"{data['bytes_per_record']:.0f} B a record"
            )
        save(report, args.json, dataset=figures)
        return
    if args.marginal:
        with tempfile.TemporaryDirectory() as tmpdir:
            figures = marginal_runs(paths, Path(tmpdir), ["jsonl", "csv", "parquet"], args.rounds)
        for key, data in figures.items():
            us = data["per_puzzle_us"]
            print(
                f"{key:45s} per puzzle: client {us['client']:.2f} us, workers {us['workers']:.2f} us, "
                f"redis {us['redis']:.2f} us; workers/client x{data['workers_over_client']:.1f}, "
                f"workers/redis x{data['workers_over_redis']:.1f}; "
                f"redis peak {data['redis_peak_mb_1m']:.0f} MB"
            )
        save(report, args.json, marginal=figures)
        return
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        base = {p.name: baseline(p.read_text().splitlines()) for p in paths}
        broker = {} if args.no_broker else broker_runs(paths, tmp, args.repeat)
        embedded = {} if args.no_embedded else embedded_runs(paths, tmp, args.repeat)
        floors = {} if args.no_floor else {p.name: floor(p, tmp) for p in paths}
    cold = [] if args.no_cold else cold_start(paths[0].read_text().splitlines()[0])
    for p in paths:
        name = p.name
        print(f"\n{name}: solve_many alone {base[name]:.2f} CPU s")
        for mode, data in (("broker", broker.get(name)), ("embedded", embedded.get(name))):
            if not data:
                continue
            cpu, insitu, wall = data["total_cpu_s"], data["insitu_solver_cpu_s"], data["wall_s"]
            rate, n = data["puzzles"] / wall, data["puzzles"]
            print(
                f"  {mode:8s} {n:,} puzzles, wall {wall:6.2f} s  {rate:9,.0f} puzzles/s  CPU {cpu:6.2f} s  "
                f"overhead x{cpu / base[name]:.3f} (in-situ solver CPU {insitu:.2f} s: x{cpu / insitu:.3f})"
            )
            if mode == "broker":
                split = (data["client_cpu_s"], data["workers_cpu_s"], data["redis_cpu_s"])
                print(
                    "           CPU split: client {:.3f} s, workers {:.3f} s, redis-server {:.3f} s".format(
                        *split
                    )
                )
            else:
                cli = (data["cli_wall_s"], data["cli_cpu_s"])
                print("           CLI as a user runs it: wall {:.2f} s, CPU {:.2f} s".format(*cli))
        if name in floors:
            parts = floors[name]
            total = sum(parts.values())
            print(
                f"  floor    x{1 + total / base[name]:.3f}: "
                + ", ".join(f"{k[:-2].replace('_', '+')} {v * 1e3:.1f} ms" for k, v in parts.items())
                + " (no glue, no Celery: the least any run adds to solving)"
            )
    if cold:
        print(f"\ncold start, one puzzle on stdin: median {statistics.median(cold):.2f} s (runs: "
              + ", ".join(f"{t:.2f}" for t in cold) + ")")  # fmt: skip
    save(report, args.json, baseline=base, broker=broker, embedded=embedded, floor=floors, cold_start_s=cold)


if __name__ == "__main__":
    main()
