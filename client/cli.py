"""`sudoku-batch`: solve, submit, collect, status, jobs, cancel, worker, health, purge, generate, warm, serve.

Exit 0 ok, 1 failed, 2 usage; interrupted by a signal: 128 + its number (Ctrl-C 130, SIGTERM 143).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Sequence

from client import numbers
from client.args import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    LOCAL_BROKER,
    Option,
    UsageError,
    add_options,
    broker_option,
    broker_or_local,
    broker_url,
    check_job_id,
    check_processes,
    data_roots,
    resume_command,
    say_error,
    time_limit,
)
from client.config import BrokerUnreachable, ClientSettings, mask_url, read_settings
from client.first_run import VersionAction, announce_compiling, run_warm
from client.interrupts import exit_code, handled, say_interrupted
from client.numbers import plural
from client.store import DEFAULT_JOBS_LISTED, MAX_JOBS_LISTED, JobStatus, cost_words
from client.target import ReaderGone
from pipeline.contract.formats import COMPRESSIONS, OUTPUTS
from pipeline.contract.tasks import (
    DEFAULT_ESCALATE_AFTER_S,
    DEFAULT_PRIORITY,
    DEFAULT_TIME_LIMIT_S,
    PRIORITIES,
)

EXIT_READER_GONE = 128 + signal.SIGPIPE  # what a shell reports for a tool whose pipe's reader left
BROKER_HELP = "redis://[:password@]host:port/db (default: SUDOKU_BATCH_BROKER"
BROKER: Option = (("--broker",), dict(metavar="URL", help=f"{BROKER_HELP})"))
LOCAL: Option = (("--broker",), dict(metavar="URL", help=f"{BROKER_HELP}, else {LOCAL_BROKER})"))
SOLVE: list[Option] = [  # the options of `solve` and `submit` after their inputs
    (
        ("--time-limit",),
        dict(
            type=time_limit,
            metavar="S",
            help=f"seconds per puzzle (default: {DEFAULT_TIME_LIMIT_S:g}; 0 or none: no limit; a resume "
            "keeps the job's)",
        ),
    ),
    (("--portfolio",), dict(help="`fast` (default), a solver name, `race`, or a comma list")),
    (("--box",), dict(metavar="RxC", help="box shape (default: inferred, 9 cells a row: 3x3, 6: 2x3)")),
    (
        ("--column",),
        dict(
            metavar="NAME",
            help="a CSV input's puzzle column, as its first line names it (default: a first line naming "
            "puzzle, puzzles, quiz, quizzes, sudoku or sudokus; without one, one puzzle a line)",
        ),
    ),
    (
        ("--broker",),
        dict(
            metavar="URL",
            help="redis://[:password@]host:port/db (default: SUDOKU_BATCH_BROKER; solve without one: "
            "embedded)",
        ),
    ),
    (
        ("--escalate-after",),
        dict(
            type=float,
            default=DEFAULT_ESCALATE_AFTER_S,
            metavar="S",
            help="escalate a puzzle unsolved after S s to idle workers too (default: "
            f"{DEFAULT_ESCALATE_AFTER_S:g}; 0: never)",
        ),
    ),
    (
        ("--priority",),
        dict(
            choices=tuple(PRIORITIES),
            help="with a broker, the workers take a higher class's chunks first: "
            f"{', '.join(PRIORITIES)} (default: {DEFAULT_PRIORITY}; a resume keeps the job's)",
        ),
    ),
]
DATASET: list[Option] = [
    (
        ("--compression",),
        dict(
            choices=tuple(COMPRESSIONS),
            help="a dataset's JSON Lines or CSV parts (Parquet: inside the file): none (default), gzip, zstd",
        ),
    ),
    (
        ("--no-splits",),
        dict(
            action="store_true",
            help="a dataset with a broker: read the inputs here, not in byte ranges on the workers",
        ),
    ),
]
OUTPUT: list[Option] = [  # where and how `solve` and `collect` write the records
    (
        ("-o", "--output"),
        dict(
            metavar="FILE",
            help="results file, .gz compresses (default: stdout); DIR/ (a trailing slash, or a directory): "
            "a dataset of part files the workers write, with _manifest.json and _SUCCESS (a path or an "
            "fsspec URL)",
        ),
    ),
    (
        ("--format",),
        dict(
            choices=OUTPUTS,
            help="jsonl, csv, or parquet (the `parquet` extra: pyarrow); default: -o's extension (.jsonl "
            "or .json, .csv, .parquet), else jsonl",
        ),
    ),
    (("--ordered",), dict(action="store_true", help="write results in input order")),
    (("--report",), dict(metavar="HTML", help="also write an HTML report with plots (default: none)")),
    (("--progress",), dict(action="store_true", help="show the progress bar even when stderr is no TTY")),
    (("-q", "--quiet"), dict(action="store_true", help="no summary on stderr")),
]
INPUTS = dict(metavar="INPUT", help="puzzle files (`-` = stdin, .gz accepted)")
COMMANDS: dict[str, tuple[str, list[Option]]] = {  # command -> (its help, its options in --help's order)
    "solve": (
        "solve whole files and wait for every result",
        [
            (("inputs",), dict(nargs="+", **INPUTS)),
            *SOLVE,
            *OUTPUT,
            *DATASET,
            (("--workers",), dict(type=int, metavar="N", help="local processes (default: one per core)")),
        ],
    ),
    "submit": (
        "submit files to the broker, print the job id and return",
        [
            (("inputs",), dict(nargs="*", **INPUTS)),
            *SOLVE,
            (
                ("--format",),
                dict(
                    choices=OUTPUTS,
                    help="what the workers render the records in: jsonl, csv or parquet (default: jsonl); "
                    "collect writes it",
                ),
            ),
            (
                ("-o", "--output"),
                dict(
                    metavar="DIR/",
                    help="a dataset directory (path or fsspec URL) the workers write the part files to; "
                    "collect JOB commits it (default: none, collect writes the records)",
                ),
            ),
            *DATASET,
            (
                ("--resume",),
                dict(
                    metavar="JOB",
                    help="go on submitting JOB after its producer died half way (INPUTs: the job's "
                    "files again; default: a new job)",
                ),
            ),
        ],
    ),
    "collect": (
        "wait for a job's results and write them",
        [
            (
                ("job",),
                dict(help="the job's id; or a committed dataset directory DIR/ to merge with -o FILE"),
            ),
            BROKER,
            (
                ("--timeout",),
                dict(
                    type=float,
                    metavar="S",
                    help="give up after S s with no result (default: wait while the job's producer lives)",
                ),
            ),
            *OUTPUT,
        ],
    ),
    "status": (
        "show a job's progress, counts, rate and live workers",
        [
            (("job",), {}),
            BROKER,
            (("--json",), dict(action="store_true")),
        ],
    ),
    "jobs": (
        "list the jobs on the broker, newest first: phase, progress, rate, age, inputs",
        [
            BROKER,
            (("--json",), dict(action="store_true", help="one JSON array of the jobs' statuses")),
            (
                ("--limit",),
                dict(
                    type=int,
                    default=DEFAULT_JOBS_LISTED,
                    metavar="N",
                    help=f"at most N jobs (default: {DEFAULT_JOBS_LISTED}; 1 to {MAX_JOBS_LISTED})",
                ),
            ),
        ],
    ),
    "cancel": ("stop a job's solving for good; what it solved stays collectable", [(("job",), {}), BROKER]),
    "worker": (
        "start a Celery worker for the broker",
        [
            LOCAL,
            (("--concurrency",), dict(type=int, metavar="N", help="worker processes (default: cores)")),
            (("--loglevel",), dict(default="warning", help="Celery's log level (default: warning)")),
            (
                ("--data-root",),
                dict(
                    action="append",
                    metavar="PATH|URL",
                    help="read inputs in splits and write datasets only under this directory or URL "
                    "prefix (repeatable; replaces SUDOKU_BATCH_DATA_ROOTS, comma-separated; default: "
                    "none, so it reads no split, writes no dataset)",
                ),
            ),
            (
                ("-E", "--events"),
                dict(
                    action="store_true",
                    help="send task events for Flower and `celery events` (docs/monitoring.md: what it "
                    "costs)",
                ),
            ),
        ],
    ),
    "health": (
        "exit 0 if the broker answers and a worker on this host beats",
        [
            LOCAL,
            (("--broker-only",), dict(action="store_true", help="only check that the broker answers")),
        ],
    ),
    "purge": ("delete a job's keys from the broker", [(("job",), {}), BROKER]),
    "generate": ("generate puzzles (unique, symmetric, rated), locally or on workers", []),
    "warm": ("compile every solver for this machine now, so no later run waits for it", []),
    "serve": ("a web page for single puzzles, jobs and workers (loopback by default)", []),
}


def parser() -> argparse.ArgumentParser:
    """The command-line grammar (cheap: no solver import, so `--help` stays fast)."""
    from client import generate, serve_args

    ap = argparse.ArgumentParser(prog="sudoku-batch", description="Solve Sudoku corpora of any size.")
    ap.add_argument("--version", action=VersionAction)
    sub = ap.add_subparsers(dest="command", required=True)
    more = {"generate": generate.OPTIONS, "serve": serve_args.OPTIONS}
    for command, (text, options) in COMMANDS.items():
        add_options(sub.add_parser(command, help=text), options + more.get(command, []))
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; return the exit code (errors are one line on stderr, never a traceback)."""
    args = parser().parse_args(argv)
    try:
        settings = read_settings()
    except ValueError as exc:
        say_error(str(exc))
        return EXIT_USAGE
    announce_compiling(args.command, getattr(args, "quiet", False))
    with handled():  # SIGINT, SIGTERM, SIGHUP: Interrupted, in the main thread
        try:
            code = _run(args, settings)
        except KeyboardInterrupt as exc:  # arrived as the command was already ending
            return exit_code(exc)
    try:
        if sys.stdout is not None:
            sys.stdout.flush()  # here, not at exit: a reader gone by now is one more quiet end
    except BrokenPipeError:
        return _reader_gone()
    return code


def _reader_gone() -> int:
    """End quietly after the reader of stdout left (`... | head -1`), as Unix tools do: exit 141; stdout
    goes to /dev/null first, so the interpreter's flush at exit prints no "Exception ignored" traceback."""
    with contextlib.suppress(OSError, ValueError):  # stdout may be closed already: nothing to point
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_READER_GONE


def _run(args: argparse.Namespace, settings: ClientSettings) -> int:
    """Dispatch the command; errors are one line on stderr, an interrupt exits 128 + the signal."""
    try:
        _check_streams(args)
        if args.command in ("solve", "submit", "collect"):
            from client.run import run_command

            return run_command(args, settings)
        if args.command == "generate":
            from client.generate import run_generate

            return run_generate(args, settings)
        if args.command == "warm":
            return run_warm()
        commands = {
            "status": _status,
            "jobs": _jobs,
            "cancel": _cancel,
            "purge": _purge,
            "health": _health,
            "serve": _serve,
            "worker": _worker,
        }
        return commands[args.command](args, settings)
    except (UsageError, BrokerUnreachable) as exc:
        say_error(str(exc))
        return EXIT_USAGE if isinstance(exc, UsageError) else EXIT_FAILED
    except ReaderGone:
        return _reader_gone()
    except KeyboardInterrupt as exc:
        return say_interrupted(exc)
    except Exception as exc:  # noqa: BLE001 - a user sees one line, never a traceback
        if os.environ.get("SUDOKU_BATCH_DEBUG"):
            raise
        say_error(f"{type(exc).__name__}: {mask_url(str(exc))}")
        return EXIT_FAILED


def _check_streams(args: argparse.Namespace) -> None:
    """Refuse, before any work, a command that would read a closed stdin or write to a closed stdout."""
    if sys.stdin is None and "-" in (getattr(args, "inputs", None) or []):
        raise UsageError("stdin is closed: there is nothing to read for `-`")
    if sys.stdout is None:
        if args.command == "submit":
            raise UsageError("stdout is closed: there is nowhere to print the job id")
        if args.command in ("solve", "collect", "generate") and args.output in (None, "-"):
            raise UsageError("stdout is closed: give the output file with -o FILE")


def _status(args: argparse.Namespace, settings: ClientSettings) -> int:
    from client.batch import BatchClient

    url, job = broker_url(args, settings, True), check_job_id(args.job)
    status = BatchClient(url, settings=settings).job(job).status()
    if args.json:
        print(status.model_dump_json(indent=2))
        return EXIT_OK if status.state != "unknown" else EXIT_FAILED
    if status.state == "unknown":
        say_error(str(status.error))
        return EXIT_FAILED
    going = "still reading input"
    if status.splits:  # read in splits, the workers count the puzzles
        going = "workers counting" if status.submission == "complete" else "still submitting splits"
    reading = {"stopped": "submission stopped", "cancelled": "cancelled"}.get(status.submission, going)
    submitted = f"{numbers.count(status.submitted)}+ ({reading})"
    total = numbers.count(status.total) if status.total is not None else submitted
    counts = ", ".join(f"{k} {numbers.count(v)}" for k, v in sorted(status.counts.items())) or "none yet"
    late = status.eta_s is not None and status.done < (status.total or 0)
    eta = f", ETA {numbers.duration(status.eta_s)}" if late else ""
    rate, done = numbers.per_second(status.rate), numbers.count(status.done)
    print(f"job {status.job}: {status.phase}, {done}/{total} puzzles, {rate} puzzles/s{eta}")
    if status.splits and status.total is None:  # the workers count the puzzles as they read the splits
        counted = numbers.count(status.submitted)
        print(f"input: submitted {status.split_submission()}; {counted} puzzles counted so far")
    print(f"counts: {counts}")
    live = len(status.workers)
    resent = f"; re-sent after a broker loss: {numbers.count(status.resent)}" if status.resent else ""
    chunks = f"{numbers.count(status.chunks_done)}/{numbers.count(status.chunks_sent)}"
    print(f"chunks: {chunks} done; live worker processes: {live}{resent}")
    print(f"cost: {cost_words(status.cpu_seconds, status.chunk_seconds, embedded=False)}")
    if status.error:
        print(f"error: {status.error}")
    if status.submission == "stopped":
        silent = status.producer_silent_s
        why = "its producer stopped" if silent is None else f"producer silent for {numbers.duration(silent)}"
        sent = status.split_submission() if status.splits else f"{numbers.count(status.checkpoint)} puzzles"
        resume = resume_command(status.job, status.inputs, broker_option(args))
        print(f"submission incomplete: {sent} submitted, {why}; resume it: {resume}")
    return EXIT_OK


def _jobs(args: argparse.Namespace, settings: ClientSettings) -> int:
    """Print the newest jobs on the broker, a line each (or `--json`: their statuses as one array)."""
    import json
    import time

    from client.batch import BatchClient

    if not 1 <= args.limit <= MAX_JOBS_LISTED:
        raise UsageError(f"--limit {args.limit}: list 1 to {MAX_JOBS_LISTED} jobs")
    url = broker_url(args, settings, True)
    jobs = BatchClient(url, settings=settings).jobs(args.limit)
    if args.json:
        print(json.dumps([job.model_dump(mode="json") for job in jobs], indent=2))
        return EXIT_OK
    now = time.time()
    print(f"{'JOB':<32}  {'PHASE':<10} {'PROGRESS':>21} {'PUZZLES/S':>10} {'AGE':>12}  INPUTS")
    for job in jobs:
        progress = _answered(job)
        age = numbers.duration(max(0.0, now - job.created))
        rate = numbers.per_second(job.rate)
        print(f"{job.job:<32}  {job.phase:<10} {progress:>21} {rate:>10} {age:>12}  {', '.join(job.inputs)}")
    return EXIT_OK


def _cancel(args: argparse.Namespace, settings: ClientSettings) -> int:
    """Cancel a job (`Job.cancel`): exit 0 once it is cancelled (or was), 1 in one line for a job that is
    gone or finished (nothing runs to stop)."""
    from client.batch import BatchClient

    url, job_id = broker_url(args, settings, True), check_job_id(args.job)
    job = BatchClient(url, settings=settings).job(job_id)
    before = job.status()
    if before.state == "unknown":
        say_error(str(before.error))
        return EXIT_FAILED
    if before.phase in ("done", "failed"):
        say_error(f"job {job_id} is {before.phase}: nothing to cancel")
        return EXIT_FAILED
    if before.phase != "cancelled" and not job.cancel() and job.status().phase != "cancelled":
        say_error(f"no such job {job_id} (purged or expired as it was cancelled)")
        return EXIT_FAILED
    was = "was cancelled already" if before.phase == "cancelled" else "cancelled"
    print(f"job {job_id}: {was}, {_answered(job.status())} puzzles answered (collect writes them)")
    return EXIT_OK


def _answered(status: JobStatus) -> str:
    """`done/total` of a job, or `done/submitted+` while its total is not known yet."""
    total = numbers.count(status.total) if status.total is not None else f"{numbers.count(status.submitted)}+"
    return f"{numbers.count(status.done)}/{total}"


def _purge(args: argparse.Namespace, settings: ClientSettings) -> int:
    from client.batch import BatchClient

    url, job = broker_url(args, settings, True), check_job_id(args.job)
    removed = BatchClient(url, settings=settings).job(job).purge()
    print(f"job {args.job}: {plural(removed, 'key')} removed")
    return EXIT_OK


def _health(args: argparse.Namespace, settings: ClientSettings) -> int:
    """Liveness probe: the broker answers, and (unless --broker-only) a worker process of this host beats."""
    import socket

    from client.config import connect
    from client.redis_store import RedisJobStore

    url = broker_or_local(args, settings)
    store = RedisJobStore(connect(url, settings), settings)
    if args.broker_only:
        print(f"ok: broker {mask_url(url)} answers")
        return EXIT_OK
    host = socket.gethostname()
    mine = [w for w in store.live_workers() if w.rsplit(":", 1)[0] == host]
    if not mine:
        say_error(f"no live worker process on {host}")
        return EXIT_FAILED
    print(f"ok: {plural(len(mine), 'live worker process', 'live worker processes')} on {host}")
    return EXIT_OK


def _serve(args: argparse.Namespace, settings: ClientSettings) -> int:
    """Serve the web page until a signal ends it (usage errors for bad limits or a port in use)."""
    from web.server import run_serve, serve_settings

    check_processes("--workers", args.workers)
    try:
        serve_settings(args)  # a bad limit
        return run_serve(args, broker_url(args, settings, False), settings)
    except ValueError as exc:  # ... or the port is taken, or the address is not this machine's
        raise UsageError(str(exc)) from None


def _worker(args: argparse.Namespace, settings: ClientSettings) -> int:
    """Replace this process by a Celery worker (`celery -A worker.app worker`) for the broker."""
    from client.config import connect

    url = broker_or_local(args, settings)  # said when it is the fallback
    check_processes("--concurrency", args.concurrency)
    roots = data_roots(args.data_root)
    connect(url, settings).close()  # fail fast, in one line, if the broker is not there
    argv = [sys.executable, "-m", "celery", "-A", "worker.app", "worker", "-Q", settings.queue]
    argv += ["-l", args.loglevel, "-n", f"sudoku-batch-{os.getpid()}@%h"]
    argv += ["--without-gossip", "--without-mingle"]
    argv += ["--task-events"] if args.events else ["--without-heartbeat"]  # monitors need the beats too
    if args.concurrency:
        argv += ["--concurrency", str(args.concurrency)]
    env = dict(os.environ, SUDOKU_BATCH_BROKER=url, SUDOKU_BATCH_DATA_ROOTS=roots)
    where = f"data roots {roots}" if roots else "no data roots: it reads no split and writes no dataset"
    print(f"starting a worker for {mask_url(url)} ({where})", file=sys.stderr)
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)
    return EXIT_FAILED  # pragma: no cover - execve does not return


if __name__ == "__main__":
    sys.exit(main())
