"""The `generate` command: make puzzles in seeded chunks, locally or on Celery workers, in chunk order.

One chunk plan (`plan_chunks`: sizes and per-chunk seeds from the run's seed) becomes a generate job
(`BatchClient.generate`) carried by the solve pipeline; its chunks are written strictly in plan order, so
the files depend only on the seed, the options and the chunk size, never on the transport or the number
of processes. The job is purged at the end."""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from client.args import EXIT_FAILED, EXIT_OK, UsageError, broker_url, check_processes, say_error
from client.config import ClientSettings, mask_url
from client.notice import NoWorkerNotice
from client.numbers import count, plural
from client.target import FLUSH_S, ReaderGone
from pipeline.contract.tasks import MAX_SEED

if TYPE_CHECKING:
    from client.args import Option
    from client.job import Job
    from client.target import Target
    from pipeline.contract.generate import GenerateResult
    from solvers.generate.generator import Options
    from solvers.model.puzzle import Box

log = logging.getLogger(__name__)
MAX_COUNT = 10**9  # puzzles of one run
MAX_CHUNKS = 1 << 20  # chunks of one run (the plan is held in memory)


OPTIONS: list[Option] = [  # the `generate` options
    (("--box",), dict(default="3x3", metavar="RxC", help="box shape, e.g. 3x3 (default), 2x3, 4x4")),
    (("--count",), dict(type=int, required=True, metavar="N", help="puzzles to generate")),
    (("--seed",), dict(type=int, metavar="S", help="same seed, same puzzles (default: random, printed)")),
    (
        ("--unique",),
        dict(
            action="store_true",
            help="dig puzzles with exactly one solution (the default; with --clues K: unique ones)",
        ),
    ),
    (("--full",), dict(action="store_true", help="write full solved grids instead of puzzles (nothing dug)")),
    (
        ("--clues",),
        dict(
            type=int,
            metavar="K",
            help="dig down to K givens (unique only with --unique; default: as far as uniqueness allows)",
        ),
    ),
    (
        ("--holes",),
        dict(
            type=float,
            metavar="F",
            help="blank this fraction of the cells of a random full grid (0-1; solvable, not unique; "
            "default: dig instead)",
        ),
    ),
    (
        ("--min-clues",),
        dict(action="store_true", help="dig to proven minimal unique puzzles (implies --unique)"),
    ),
    (("--symmetry",), dict(default="none", help="none (default), rotational or mirror")),
    (
        ("--difficulty",),
        dict(metavar="LEVELS", help="keep only these levels: easy,medium,hard,expert (default: all)"),
    ),
    (
        ("--attempts",),
        dict(
            type=int,
            default=100,
            metavar="A",
            help="candidates per puzzle before a target is given up (default: 100)",
        ),
    ),
    (
        ("--chunk-size",),
        dict(
            type=int,
            metavar="C",
            help="puzzles per chunk, part of what the seed reproduces (default: by box and options)",
        ),
    ),
    (("--workers",), dict(type=int, metavar="N", help="local processes (default: one per core)")),
    (
        ("--broker",),
        dict(
            metavar="URL",
            help="fan out over Celery workers: redis://[:password@]host:port/db "
            "(default: SUDOKU_BATCH_BROKER; none: local processes)",
        ),
    ),
    (("-o", "--output"), dict(metavar="FILE", help="puzzles, one per line (default: stdout)")),
    (("--solutions",), dict(metavar="FILE", help="also write the solutions, line-aligned (default: no)")),
    (
        ("--meta",),
        dict(
            metavar="FILE", help="also write JSON lines of metadata (difficulty), line-aligned (default: no)"
        ),
    ),
    (("--progress",), dict(action="store_true", help="show the progress bar even when stderr is no TTY")),
    (("-q", "--quiet"), dict(action="store_true", help="no summary on stderr")),
]


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
    from pipeline.contract.generate import max_chunk_size
    from solvers.generate.generator import Options, default_chunk_size, plan_chunks, random_seed
    from solvers.model.puzzle import Box

    _check_flags(args)
    try:
        box = Box.parse(args.box)
        # unique unless --full; a target named without --unique (--clues K, --holes F) keeps the meaning it
        # had before unique became the default: dug that far, uniqueness not asked
        unique = not args.full and (args.unique or (args.clues is None and args.holes is None))
        options = Options(
            unique=unique,
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
    most = max_chunk_size(box, options.attempts)  # what workers accept (`GenerateTask`)
    if args.chunk_size is not None and args.chunk_size > most:
        raise UsageError(
            f"--chunk-size {args.chunk_size}: at most {most:,} puzzles of {box} with these options"
        )
    size = args.chunk_size or min(default_chunk_size(box, options), most)
    if -(-args.count // size) > MAX_CHUNKS:
        raise UsageError(
            f"--count {args.count} in chunks of {size}: over {MAX_CHUNKS:,} chunks; raise --chunk-size"
        )
    return Request(
        box, args.count, seed, args.seed is not None, options, size, plan_chunks(args.count, seed, size)
    )


def _check_flags(args: argparse.Namespace) -> None:
    """UsageError (exit 2) for flags that exclude each other, a number out of bounds, or output files that
    collide: what the user must fix before anything is planned."""
    from pipeline.contract.generate import MAX_ATTEMPTS

    if args.full and (args.unique or args.clues is not None or args.holes is not None or args.min_clues):
        raise UsageError("--full writes full grids: it excludes --unique, --clues, --holes and --min-clues")
    if args.clues is not None and args.min_clues:
        raise UsageError("--clues and --min-clues exclude each other: ask for a count or for minimal puzzles")
    if args.holes is not None and (args.clues is not None or args.min_clues):
        raise UsageError("--holes excludes --clues and --min-clues: ask for one target")
    if args.holes is not None and not 0.0 <= args.holes <= 1.0:
        raise UsageError(f"--holes must be a fraction from 0 to 1, not {args.holes}")
    if args.count < 1:
        raise UsageError("--count must be at least 1")
    if args.count > MAX_COUNT:
        raise UsageError(f"--count {args.count}: at most {MAX_COUNT:,} puzzles a run")
    if args.attempts is not None and args.attempts > MAX_ATTEMPTS:
        raise UsageError(f"--attempts {args.attempts}: at most {MAX_ATTEMPTS:,}")
    if args.seed is not None and not 0 <= args.seed <= MAX_SEED:
        raise UsageError(f"--seed must be between 0 and {MAX_SEED}")
    for flag in ("--workers", "--chunk-size", "--attempts"):
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be at least 1")
    check_processes("--workers", args.workers)
    paths = [p for p in (args.output, args.solutions, args.meta) if p not in (None, "-")]
    if len({os.path.abspath(p) for p in paths}) < len(paths):
        raise UsageError("-o, --solutions and --meta must be different files")
    if args.solutions == "-" or args.meta == "-":
        raise UsageError("only the puzzles (-o) can go to stdout")


@dataclass
class Tally:
    """What the summary reports: puzzles written, targets missed, levels, clue counts, CPU."""

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

    def add(self, planned: int, result: GenerateResult) -> None:
        """Count one chunk (its meta lines carry every flag)."""
        self.planned_done += planned
        self.produced += len(result)
        self.cpu_s += result.header.stats.cpu_s
        for line in result.meta:
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
    """The output files (puzzles, solutions, meta): regular files under temporary names renamed at the end,
    FIFOs and devices written straight through (`client.target.Target`)."""

    def __init__(self, names: tuple[str | None, str | None, str | None], say: Callable[[str], None]) -> None:
        """`names`: the puzzles' file (None or `-`: stdout), the solutions' and the meta's (None: not
        written); `say`: where a line for the user goes while a FIFO waits for its reader (`Target`)."""
        self._say = say
        self._files: list[tuple[TextIO, Target | None]] = []
        self._flushed = time.monotonic()
        self._gone = False  # the reader of a pipe closed it
        try:
            self._streams = [self._open(name) if name or i == 0 else None for i, name in enumerate(names)]
        except BaseException:
            self.close(False)
            raise

    def _open(self, name: str | None) -> TextIO:
        if name in (None, "-"):
            self._files.append((sys.stdout, None))
            return sys.stdout
        from client.target import Target

        target = Target(name, self._say)  # type: ignore[arg-type]
        stream = io.TextIOWrapper(target.stream, encoding="utf-8", newline="\n", write_through=True)
        self._files.append((stream, target))
        return stream

    def write(self, result: GenerateResult) -> None:
        """Append one chunk's lines to every file (line-aligned), flushed at least every FLUSH_S;
        ReaderGone when the reader of a pipe closed it (`generate ... | head -1`)."""
        if not len(result):
            return
        try:
            for stream, lines in zip(
                self._streams, (result.puzzles, result.solutions, result.meta), strict=True
            ):
                if stream is not None:
                    stream.write("\n".join(lines) + "\n")
            now = time.monotonic()
            if now - self._flushed >= FLUSH_S:
                for stream, _ in self._files:  # a text stream's flush flushes its target's bytes too
                    stream.flush()
                self._flushed = now
        except BrokenPipeError:
            self._gone = True
            raise ReaderGone("the reader of the output closed it") from None

    def close(self, complete: bool) -> None:
        """Rename the files into place when complete; delete the partial ones otherwise (a pipe whose
        reader is gone is left unflushed: no one reads it)."""
        files, self._files = self._files, []
        gone = False
        for stream, target in files:  # every one, whichever pipe lost its reader
            try:
                stream.flush()
                if target is not None:
                    stream.detach()  # the target closes the bytes stream itself
                    target.close(complete)
            except BrokenPipeError:
                gone = True
        if gone and not self._gone:  # else it was raised from `write` already
            self._gone = True
            raise ReaderGone("the reader of the output closed it")


def run_generate(args: argparse.Namespace, settings: ClientSettings) -> int:
    """Run `generate`: plan, send the chunks to local processes or workers, write them in order, summarise."""
    from client.batch import BatchClient
    from client.progress import Progress
    from pipeline.contract.generate import GenerateOptions

    req = build_request(args)
    url = broker_url(args, settings, required=False)
    workers, where = _place(args, url, len(req.plan))
    client = BatchClient(url, workers=workers, settings=settings, daemon=True)  # a broker: checked here
    if not req.seed_given:
        print(f"seed {req.seed} (pass --seed {req.seed} to replay this run)", file=sys.stderr, flush=True)
    started = time.monotonic()
    tally = Tally()
    progress = Progress(args.progress or sys.stderr.isatty())
    complete = False
    job = None
    try:
        meta = {"box": str(req.box), "total": str(req.count), "seed": str(req.seed)}
        options = GenerateOptions.model_validate(req.options.to_dict())
        job = client.generate(req.box, req.plan, options, meta)
        store = client.store
        notice = NoWorkerNotice(lambda: len(store.live_workers()), after=settings.no_worker_notice_s)
        sink = Sink((args.output, args.solutions, args.meta), progress.say)
        try:
            for result in job.generated(on_wait=None if client.embedded else notice.check):
                sink.write(result)
                tally.add(req.plan[result.header.chunk][1], result)
                progress.update(tally.planned_done, req.count, tally.planned_done)
            job.wait_submitted()
            complete = True
        finally:
            sink.close(complete)
    except KeyboardInterrupt:
        client.kill()  # at once: the chunks in flight are not wanted
        raise
    except Exception as exc:
        if url is not None and type(exc).__module__.startswith("redis"):
            raise ConnectionError(f"lost the broker {mask_url(url)}: {exc}") from None
        raise
    finally:
        progress.close()
        if job is not None:
            _end_job(job, complete)
        client.close()
    if not args.quiet:
        print(summary(req, tally, where, time.monotonic() - started), file=sys.stderr)
    if tally.produced < req.count:  # the difficulty filter met too few candidates: never a quiet success
        _say_shortfall(req, tally)
        return EXIT_FAILED
    return EXIT_OK


def _place(args: argparse.Namespace, url: str | None, chunks: int) -> tuple[int, str]:
    """The local processes a run of `chunks` chunks starts (1 with a broker) and where it runs, for the
    summary; UsageError for --workers with a broker (the workers' own concurrency applies)."""
    if url is not None and args.workers is not None:
        raise UsageError("--workers sets local processes; with a broker the workers' own concurrency applies")
    if url is None:
        from client.pool import default_workers, max_workers

        workers = min(args.workers or min(default_workers(), max_workers()), chunks)
        return workers, f"with {plural(workers, 'local process', 'local processes')}"
    return 1, f"through {mask_url(url)}"


def _end_job(job: Job, complete: bool) -> None:
    """Stop the job's producer and purge the job (cut short: workers still making chunks stop); a purge that
    fails is logged, as the results expire with the job."""
    if job.producing:
        job.cancel(wait=2.0)
    try:  # cut short: workers still making chunks stop
        job.purge(stop=not complete)
    except Exception as exc:  # noqa: BLE001 - the results expire on their own (job TTL)
        log.warning("job %s: not purged, its results expire with the job: %s", job.id, exc)


def _say_shortfall(req: Request, tally: Tally) -> None:
    """Say in one line that fewer puzzles than asked were made (the difficulty filter met too few candidates
    within the attempts): a run that falls short is never a quiet success."""
    o = req.options
    levels = ",".join(sorted(o.difficulty or ()))
    say_error(
        f"generated {count(tally.produced)} of {plural(req.count, 'puzzle')}: too few candidates of "
        f"level {levels} within {plural(o.attempts, 'attempt')} per puzzle (raise --attempts, add levels)"
    )


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
        f"generated {count(tally.produced)} of {plural(req.count, 'puzzle')} ({req.box} boxes, "
        f"{', '.join(asked)}) in {wall_s:.1f} s {where}, {tally.cpu_s:.1f} CPU s; seed {req.seed}, "
        f"chunk size {req.chunk_size}"
    ]
    if tally.produced:
        from solvers.generate.difficulty import LEVEL_NAMES

        rank = {name: i for i, name in enumerate(LEVEL_NAMES)}
        ranked = sorted(tally.levels.items(), key=lambda kv: rank.get(kv[0], len(rank)))  # unknown ones last
        levels = ", ".join(f"{name} {n}" for name, n in ranked)
        mean = tally.clue_sum / tally.produced
        lines.append(f"levels: {levels}; clues {tally.clue_min}-{tally.clue_max} (mean {mean:.1f})")
    target = o.clue_target(req.box)
    if target is not None and tally.missed_clues:
        lines.append(
            f"{count(tally.missed_clues)} missed the target of {plural(target, 'clue')} after "
            f"{plural(o.attempts, 'attempt')} each "
            '(closest candidates written, "reached": false in --meta)'
        )
    if o.minimal and tally.not_minimal:
        lines.append(f'{tally.not_minimal} not proven minimal ("minimal": false in --meta)')
    if not o.unique and tally.not_unique and not o.full_grids:
        lines.append(f"{tally.not_unique} not unique or not proven unique (no --unique)")
    return "\n".join(lines)
