"""The `generate` command: make puzzles in seeded chunks, locally or on Celery workers, in chunk order.

One chunk plan (`solvers.generator.plan_chunks`: sizes and per-chunk seeds from the run's
seed) is run by one in-process loop, a pool of forked local processes, or Celery workers
reached by task name (`TASK_NAME`, JSON payload). Every one of them calls
`generate_chunk` + `render_lines` on the same (box, count, chunk seed, options), and the
writer appends chunks strictly in plan order, so the files depend only on the seed, the
options and the chunk size, never on the transport or the number of processes.

Through a broker, workers write each chunk's lines under the job in Redis with the
pipeline's idempotent result write (`solvers.chunk_store.result_commands`); the client
reads the arrival list, holds chunks that arrived early, and purges the job at the end.
A chunk body (what a worker stores, what a local process returns) is one JSON object:
`{"n", "puzzles", "solutions", "meta", "error", "cpu_s"}` with line lists.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from client.cli import EXIT_OK, UsageError, broker_url
from client.config import ClientSettings, mask_url

if TYPE_CHECKING:
    from client.redis_store import RedisJobStore
    from solvers.generator import Options
    from solvers.puzzle import Box

TASK_NAME = "sudoku_batch.generate_chunk"  # the worker's task (worker/tasks.py), sent by name
MAX_SEED = 2**63 - 1
WARN_NO_WORKER_S = 10.0  # broker mode: say so on stderr when nothing arrives and no worker beats


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The `generate` options (cheap: no solver import, so `--help` stays fast)."""
    p.add_argument("--box", default="3x3", metavar="RxC", help="box shape, e.g. 3x3 (default), 2x3, 4x4")
    p.add_argument("--count", type=int, required=True, metavar="N", help="puzzles to generate")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        metavar="S",
        help="same seed, same puzzles (default: random, printed)",
    )
    p.add_argument("--unique", action="store_true", help="dig puzzles with exactly one solution")
    p.add_argument("--clues", type=int, default=None, metavar="K", help="dig down to K givens")
    p.add_argument(
        "--holes",
        type=float,
        default=None,
        metavar="F",
        help="blank this fraction of the cells of a random full grid (0-1; solvable, not unique)",
    )
    p.add_argument(
        "--min-clues", action="store_true", help="dig to proven minimal unique puzzles (implies --unique)"
    )
    p.add_argument("--symmetry", default="none", help="none (default), rotational or mirror")
    p.add_argument(
        "--difficulty", default=None, metavar="LEVELS", help="keep only these levels: easy,medium,hard,expert"
    )
    p.add_argument(
        "--attempts",
        type=int,
        default=100,
        metavar="A",
        help="candidates per puzzle before a target is given up",
    )
    p.add_argument(
        "--chunk-size",
        type=int,
        default=None,
        metavar="C",
        help="puzzles per chunk (part of what the seed reproduces)",
    )
    p.add_argument(
        "--workers", type=int, default=None, metavar="N", help="local processes (default: all cores)"
    )
    p.add_argument(
        "--broker",
        default=None,
        metavar="URL",
        help="fan out over Celery workers: redis://[:password@]host:port/db",
    )
    p.add_argument(
        "-o", "--output", default=None, metavar="FILE", help="puzzles, one per line (default: stdout)"
    )
    p.add_argument("--solutions", default=None, metavar="FILE", help="also write the solutions, line-aligned")
    p.add_argument(
        "--meta",
        default=None,
        metavar="FILE",
        help="also write JSON lines of metadata (difficulty), line-aligned",
    )
    p.add_argument("--progress", action="store_true", help="show the progress bar even when stderr is no TTY")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")


@dataclass(frozen=True)
class Request:
    """A checked `generate` command line: what to make and how the run is cut into chunks."""

    box: Box
    count: int
    seed: int
    seed_given: bool
    options: Options
    chunk_size: int
    plan: list[tuple[int, int, int]]  # (index, count, seed) per chunk


def build_request(args: argparse.Namespace) -> Request:
    """Check the command line (UsageError, exit 2, for anything the user must fix) and plan the chunks."""
    from solvers.generator import Options, default_chunk_size, plan_chunks, random_seed
    from solvers.puzzle import Box

    if args.clues is not None and args.min_clues:
        raise UsageError("--clues and --min-clues exclude each other: ask for a count or for minimal puzzles")
    if args.holes is not None and (args.clues is not None or args.min_clues):
        raise UsageError("--holes excludes --clues and --min-clues: ask for one target")
    if args.holes is not None and not 0.0 <= args.holes <= 1.0:
        raise UsageError(f"--holes must be a fraction from 0 to 1, not {args.holes}")
    if args.count < 1:
        raise UsageError("--count must be at least 1")
    if args.seed is not None and not 0 <= args.seed <= MAX_SEED:
        raise UsageError(f"--seed must be between 0 and {MAX_SEED}")
    for flag, value in (
        ("--workers", args.workers),
        ("--chunk-size", args.chunk_size),
        ("--attempts", args.attempts),
    ):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be at least 1")
    paths = [p for p in (args.output, args.solutions, args.meta) if p not in (None, "-")]
    if len({os.path.abspath(p) for p in paths}) < len(paths):
        raise UsageError("-o, --solutions and --meta must be different files")
    if args.solutions == "-" or args.meta == "-":
        raise UsageError("only the puzzles (-o) can go to stdout")
    try:
        box = Box.parse(args.box)
        options = Options(
            unique=args.unique,
            clues=args.clues,
            holes=args.holes,
            minimal=args.min_clues,
            symmetry=args.symmetry,
            difficulty=args.difficulty,
            attempts=args.attempts,
        )
        options.check(box)
    except ValueError as exc:  # PuzzleError too
        raise UsageError(str(exc)) from None
    seed = args.seed if args.seed is not None else random_seed()
    size = args.chunk_size or default_chunk_size(box, options)
    return Request(
        box, args.count, seed, args.seed is not None, options, size, plan_chunks(args.count, seed, size)
    )


def chunk_body(box_text: str, count: int, seed: int, options: dict[str, Any]) -> dict[str, Any]:
    """Generate one chunk and render its lines: the unit of work of a local process (the worker's twin)."""
    from solvers.generator import Options, generate_chunk, render_lines
    from solvers.puzzle import Box

    start = time.process_time()
    box = Box.parse(box_text)
    items = generate_chunk(box, count, seed, Options.from_dict(options))
    puzzles, solutions, meta = render_lines(items, box)
    cpu = time.process_time() - start
    return {
        "n": len(items),
        "puzzles": puzzles,
        "solutions": solutions,
        "meta": meta,
        "error": None,
        "cpu_s": cpu,
    }


@dataclass
class Tally:
    """What the summary reports: puzzles written, targets missed, levels, clue counts, CPU."""

    requested: int
    produced: int = 0
    planned_done: int = 0  # requested puzzles of the chunks written so far (progress)
    missed_clues: int = 0
    not_minimal: int = 0
    not_unique: int = 0
    levels: Counter[str] = field(default_factory=Counter)
    clue_min: int | None = None
    clue_max: int = 0
    clue_sum: int = 0
    cpu_s: float = 0.0

    def add(self, planned: int, body: dict[str, Any]) -> None:
        """Count one chunk (its meta lines carry every flag)."""
        self.planned_done += planned
        self.produced += int(body["n"])
        self.cpu_s += float(body.get("cpu_s") or 0.0)
        for line in body["meta"]:
            m = json.loads(line)
            self.missed_clues += not m["reached"]
            self.not_minimal += not m["minimal"]
            self.not_unique += not m["unique"]
            self.levels[m["level"]] += 1
            k = int(m["clues"])
            self.clue_min = k if self.clue_min is None else min(self.clue_min, k)
            self.clue_max = max(self.clue_max, k)
            self.clue_sum += k


class Sink:
    """The output files (puzzles, solutions, meta), written under temporary names and renamed at the end."""

    def __init__(self, output: str | None, solutions: str | None, meta: str | None) -> None:
        self._files: list[tuple[TextIO, Path | None, Path | None]] = []  # (stream, temp, final)
        self.puzzles = self._open(output)
        self.solutions = self._open(solutions) if solutions else None
        self.meta = self._open(meta) if meta else None

    def _open(self, name: str | None) -> TextIO:
        if name in (None, "-"):
            self._files.append((sys.stdout, None, None))
            return sys.stdout
        final = Path(name)
        temp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
        stream = temp.open("w", encoding="utf-8", newline="\n")
        self._files.append((stream, temp, final))
        return stream

    def write(self, body: dict[str, Any]) -> None:
        """Append one chunk's lines to every file (line-aligned)."""
        if not body["n"]:
            return
        self.puzzles.write("\n".join(body["puzzles"]) + "\n")
        if self.solutions is not None:
            self.solutions.write("\n".join(body["solutions"]) + "\n")
        if self.meta is not None:
            self.meta.write("\n".join(body["meta"]) + "\n")

    def close(self, complete: bool) -> None:
        """Rename the files into place when complete; delete the partial ones otherwise."""
        for stream, temp, final in self._files:
            if temp is None or final is None:
                stream.flush()
                continue
            stream.close()
            if complete:
                os.replace(temp, final)
            else:
                temp.unlink(missing_ok=True)


def run_generate(args: argparse.Namespace, settings: ClientSettings) -> int:
    """Run `generate`: plan, produce chunks locally or through the broker, write them in order, summarise."""
    req = build_request(args)
    url = broker_url(args, settings, required=False)
    if url is not None and args.workers is not None:
        raise UsageError("--workers sets local processes; with a broker the workers' own concurrency applies")
    store = None
    if url is not None:  # fail fast, in one line (exit 1), before anything is printed or opened
        from client.redis_store import RedisJobStore, connect

        store = RedisJobStore(connect(url, settings), settings)
    if not req.seed_given:
        print(f"seed {req.seed} (pass --seed {req.seed} to replay this run)", file=sys.stderr, flush=True)
    from client.progress import Progress

    if url is not None and store is not None:
        chunks: Iterator[tuple[int, dict[str, Any]]] = broker_chunks(req, url, store, settings)
        where = f"through {mask_url(url)}"
    else:
        from client.transport import default_workers

        workers = min(args.workers or default_workers(), len(req.plan))
        chunks = local_chunks(req, workers)
        where = f"with {workers} local process{'es' if workers > 1 else ''}"
    started = time.monotonic()
    tally = Tally(req.count)
    progress = Progress(args.progress or sys.stderr.isatty())
    sink = Sink(args.output, args.solutions, args.meta)
    complete = False
    try:
        for planned, body in chunks:
            sink.write(body)
            tally.add(planned, body)
            progress.update(tally.planned_done, req.count, tally.planned_done)
        complete = True
    finally:
        sink.close(complete)
        progress.close()
        close = getattr(chunks, "close", None)
        if close is not None:
            close()  # stops a pool or purges a broker job even after an error
    if not args.quiet:
        print(summary(req, tally, where, time.monotonic() - started), file=sys.stderr)
    return EXIT_OK


def summary(req: Request, tally: Tally, where: str, wall_s: float) -> str:
    """The stderr summary: counts, seed, targets missed, filter shortfall, levels and clue range."""
    o = req.options
    asked = ["full grids" if o.full_grids else "unique" if o.unique else "uniqueness not asked"]
    if o.minimal:
        asked.append("minimal")
    if o.clues is not None:
        asked.append(f"{o.clues} clues")
    if o.holes is not None:
        asked.append(f"holes {o.holes:g} ({o.clue_target(req.box)} clues)")
    if o.symmetry != "none":
        asked.append(f"{o.symmetry} symmetry")
    if o.difficulty:
        asked.append("levels " + ",".join(sorted(o.difficulty)))
    lines = [
        f"generated {tally.produced} of {req.count} puzzles ({req.box} boxes, {', '.join(asked)}) "
        f"in {wall_s:.1f} s {where}, {tally.cpu_s:.1f} CPU s; seed {req.seed}, chunk size {req.chunk_size}"
    ]
    if tally.produced:
        levels = ", ".join(
            f"{name} {n}" for name, n in sorted(tally.levels.items(), key=lambda kv: _level_rank(kv[0]))
        )
        mean = tally.clue_sum / tally.produced
        lines.append(f"levels: {levels}; clues {tally.clue_min}-{tally.clue_max} (mean {mean:.1f})")
    target = o.clue_target(req.box)
    if target is not None and tally.missed_clues:
        lines.append(
            f"{tally.missed_clues} missed the target of {target} clues after {o.attempts} attempts each "
            '(closest candidates written, "reached": false in --meta)'
        )
    if o.minimal and tally.not_minimal:
        lines.append(f'{tally.not_minimal} not proven minimal ("minimal": false in --meta)')
    if not o.unique and tally.not_unique and not o.full_grids:
        lines.append(f"{tally.not_unique} not unique or not proven unique (no --unique)")
    if tally.produced < req.count:
        lines.append(
            f"difficulty filter: {req.count - tally.produced} short of {req.count} "
            f"(no matching candidate within {o.attempts} attempts per puzzle)"
        )
    return "\n".join(lines)


def _level_rank(name: str) -> int:
    from solvers.difficulty import LEVEL_NAMES

    return LEVEL_NAMES.index(name) if name in LEVEL_NAMES else len(LEVEL_NAMES)


def _ignore_sigint() -> None:
    """Local processes leave Ctrl-C to the parent, which stops the pool."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def warm(box: Box) -> None:
    """Load the generator's compiled kernels here, so forked processes start warm (~0.2 CPU s each saved).

    Kernels are typed, not sized: a 2x2 run loads them all, plus a 4x4 one for the fill
    path of sides above 12.
    """
    from solvers.generator import Options, generate_chunk
    from solvers.puzzle import Box

    generate_chunk(Box(2, 2), 1, 0, Options(unique=True))
    if box.n > 12:
        generate_chunk(Box(4, 4), 1, 0, Options(unique=True))


def local_chunks(req: Request, workers: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (planned count, body) per chunk in plan order: in-process for one worker, else forked processes.

    At most 2 chunks per process are in flight, which bounds what waits in memory for the writer.
    """
    payload = req.options.to_dict()
    box = f"{req.box.rows}x{req.box.cols}"
    if workers <= 1:
        for _, size, seed in req.plan:
            yield size, chunk_body(box, size, seed, payload)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    warm(req.box)
    pool = ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("fork"), initializer=_ignore_sigint
    )
    try:
        futures: list[tuple[int, Future[dict[str, Any]]]] = []
        sent = 0
        for i in range(len(req.plan)):
            while sent < len(req.plan) and sent < i + 2 * workers:
                _, size, seed = req.plan[sent]
                futures.append((size, pool.submit(chunk_body, box, size, seed, payload)))
                sent += 1
            size, future = futures[i]
            futures[i] = (size, None)  # type: ignore[assignment] # written: let the body go
            yield size, future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def broker_chunks(
    req: Request, url: str, store: RedisJobStore, settings: ClientSettings
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (planned count, body) per chunk in plan order from Celery workers; the job is purged at the end.

    Chunks are sent a few per live worker process ahead of the writer (which bounds what
    waits in memory); a redelivered chunk is read once.
    """
    import redis

    from client.transport import celery_app

    job = uuid.uuid4().hex
    store.create(
        job,
        {
            "kind": "generate",
            "box": str(req.box),
            "total": str(req.count),
            "seed": str(req.seed),
            "chunks_total": str(len(req.plan)),
            "created": f"{time.time():.3f}",
        },
    )
    app = celery_app(url, settings)
    send = _sender(app, url, settings, job, req)
    try:
        yield from _gather(store, job, req, send, settings.poll_interval, settings.resend_after)
    except redis.RedisError as exc:
        raise ConnectionError(f"lost the broker {mask_url(url)}: {exc}") from None
    finally:
        with contextlib.suppress(redis.RedisError):  # else the results expire on their own (job TTL)
            store.purge(job)
        app.close()


def _sender(app: Any, url: str, settings: ClientSettings, job: str, req: Request) -> Callable[[int], None]:
    """A function sending chunk `i` of the plan to the workers' queue by task name (JSON kwargs)."""
    options = req.options.to_dict()
    box = f"{req.box.rows}x{req.box.cols}"

    def send(i: int) -> None:
        _, size, seed = req.plan[i]
        task = {"job": job, "chunk": i, "box": box, "count": size, "seed": seed, "options": options}
        try:
            app.send_task(
                TASK_NAME,
                kwargs={"task": task},
                queue=settings.queue,
                retry=True,
                retry_policy={
                    "max_retries": 3,
                    "interval_start": 0.2,
                    "interval_step": 0.5,
                    "interval_max": 1.0,
                },
            )
        except Exception as exc:  # noqa: BLE001 - kombu raises many kinds; all mean the same here
            raise ConnectionError(f"cannot send to broker {mask_url(url)}: {exc}") from None

    return send


def _gather(
    store: RedisJobStore,
    job: str,
    req: Request,
    send: Callable[[int], None],
    poll: float,
    resend_after: float = 30.0,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Send chunks within a window, read arrivals, and yield bodies in plan order.

    After `resend_after` s without an arrival, chunks the broker lost are sent again
    (`_resend_lost`); a chunk answered twice is read once.
    """
    total = len(req.plan)
    pending: dict[int, dict[str, Any]] = {}
    seen: set[int] = set()
    waiting: dict[int, float] = {}  # chunk sent, no result yet -> when it was (last) sent
    sent = written = cursor = 0
    live, live_checked = 0, -1e9
    last_arrival = last_sweep = time.monotonic()
    warned = False
    while written < total:
        now = time.monotonic()
        if now - live_checked > 5.0:
            live, live_checked = len(store.live_workers()), now
        window = max(4, 2 * live + 2)
        if sent < min(total, written + window):
            while sent < min(total, written + window):
                send(sent)
                waiting[sent] = time.monotonic()
                sent += 1
            store.update(job, {"chunks_sent": str(sent)})
        arrived, cursor = store.arrivals(job, cursor)
        new = sorted({c for c in arrived if c not in seen})
        if new:
            last_arrival = now
            for c, raw in zip(new, store.fetch(job, new), strict=True):
                if raw is None:
                    raise RuntimeError(f"chunk {c}: its result expired before it was read")
                body = json.loads(raw)
                if body.get("error"):
                    raise RuntimeError(f"chunk {c}: {body['error']}")
                seen.add(c)
                waiting.pop(c, None)
                pending[c] = body
            while written in pending:
                yield req.plan[written][1], pending.pop(written)
                written += 1
            continue
        if not warned and live == 0 and now - last_arrival > WARN_NO_WORKER_S:
            print(f"waiting: no live worker on the broker for {WARN_NO_WORKER_S:g} s", file=sys.stderr)
            warned = True
        if now - last_arrival >= resend_after and now - last_sweep >= resend_after:
            last_sweep = now
            _resend_lost(store, job, waiting, send, resend_after)
        time.sleep(poll)


def _resend_lost(
    store: RedisJobStore, job: str, waiting: dict[int, float], send: Callable[[int], None], after: float
) -> int:
    """Send again each chunk waited on over `after` s that no live worker is generating; return how many.

    Only once the broker queue has drained: the broker can lose a message popped as Redis
    stops (see client/resend.py), but a chunk still queued behind slow ones is not lost.
    """
    if store.queued():
        return 0
    running = store.running()
    now = time.monotonic()
    count = 0
    for chunk, at in sorted(waiting.items()):
        if now - at >= after and f"{job}:{chunk}" not in running:
            send(chunk)
            waiting[chunk] = now
            count += 1
    if count:
        store.update(job, {"resent": str(int(store.meta(job).get("resent", 0)) + count)})
    return count
