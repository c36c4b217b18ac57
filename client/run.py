"""The `solve`, `submit` and `collect` commands: drive a Job, write its output, progress and summary."""

from __future__ import annotations

import argparse
import sys
import time

from client.batch import BatchClient, Job
from client.cli import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    broker_url,
    check_processes,
    check_seconds,
    input_sources,
    resume_command,
)
from client.collector import JobFailed
from client.config import ClientSettings, mask_url
from client.output import Output
from client.progress import Progress
from client.store import submission_state
from client.summary import Summary
from client.target import check_target
from solvers.chunk import MAX_TIME_LIMIT_S

MAX_WAIT_S = 7 * 86400.0  # `collect --timeout`: no result waits longer in the broker (the job TTL)


def run_command(args: argparse.Namespace, settings: ClientSettings) -> int:
    """Run solve, submit or collect; return the exit code."""
    url = broker_url(args, settings, required=args.command != "solve")
    resume = getattr(args, "resume", None)
    if args.command != "collect":
        if not args.inputs and not resume:
            raise UsageError(f"{args.command} needs at least one INPUT")
        sources = input_sources(args.inputs)
        check_seconds("--time-limit", args.time_limit, MAX_TIME_LIMIT_S)
    else:
        check_seconds("--timeout", args.timeout, MAX_WAIT_S)
    if getattr(args, "output", None) not in (None, "-"):
        try:
            check_target(args.output)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    workers = getattr(args, "workers", None)
    check_processes("--workers", workers)
    client = BatchClient(url, workers=workers, settings=settings)
    try:
        if args.command == "collect":
            return _collect(client.job(args.job), args, purge=False, idle_timeout=args.timeout)
        try:
            if resume:
                job = client.resume(
                    resume, [src for _, src in sources] or None, time_limit=args.time_limit,
                    portfolio=args.portfolio, box=args.box, bounded=False,
                )  # fmt: skip
            else:
                job = client.submit_inputs(
                    sources, time_limit=args.time_limit, portfolio=args.portfolio, box=args.box,
                    bounded=args.command == "solve",
                )  # fmt: skip
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        try:
            if args.command == "submit":
                return _submit(job)
            return _collect(job, args, purge=not client.embedded, idle_timeout=None)
        except KeyboardInterrupt:
            job.cancel()
            raise
    finally:
        client.close()


def _submit(job: Job) -> int:
    """Print the job id at once, then finish sending the input."""
    print(job.id, flush=True)
    try:
        job.wait_submitted()
    except Exception as exc:  # noqa: BLE001 - reported in one line
        print(f"error: job {job.id}: {mask_url(str(exc))}{_resume_hint(job)}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _collect(job: Job, args: argparse.Namespace, purge: bool, idle_timeout: float | None) -> int:
    """Write every result of `job`, with progress and summary; exit 1 if the job cannot finish."""
    output = Output(args.output, args.format)
    summary = Summary()
    progress = Progress(args.progress or sys.stderr.isatty())
    store = job.client.store
    seen: set[int] = set()
    written = 0
    total: list[int | None] = [None, 0]  # (total once known, submitted so far)
    last_meta = [0.0]

    def refresh(force: bool = False) -> None:
        now = time.monotonic()
        if progress.enabled and (force or now - last_meta[0] > 0.5):
            last_meta[0] = now
            meta = store.meta(job.id)
            total[0] = int(meta["total"]) if "total" in meta else None
            total[1] = int(meta.get("submitted", 0))
        progress.update(written, total[0], total[1])

    complete = False
    try:
        chunks = job.chunks(args.ordered, idle_timeout=idle_timeout, on_wait=refresh, keep=not purge)
        for result, start, stop in chunks:
            output.write(result, start, stop)
            written += stop - start
            if result.header.chunk not in seen:
                seen.add(result.header.chunk)
                summary.add(result.header.stats, result.header.input)
            refresh()
        job.wait_submitted()
        expected = int(store.meta(job.id).get("total", written))
        if written != expected:
            raise JobFailed(f"{expected - written} of {expected} results are missing")
        complete = True
    except (JobFailed, ConnectionError, OSError, RuntimeError) as exc:
        progress.close()
        print(f"error: job {job.id}: {mask_url(str(exc))}{_resume_hint(job)}", file=sys.stderr)
    finally:
        summary.finish()
        output.close(complete)
        if complete:
            progress.update(written, written, written, force=True)
        progress.close()
    if not complete:
        return EXIT_FAILED
    if purge:
        job.purge()
    if not args.quiet:
        print(summary.text(), file=sys.stderr)
    if args.report:
        from client.report import write_report

        write_report(summary, args.report)
    return EXIT_OK


def _resume_hint(job: Job) -> str:
    """`; resume it: ...` when the job's submission stopped half way and a resume can finish it, else ``."""
    if job.client.embedded or job.producing:
        return ""
    try:
        meta = job.client.store.meta(job.id)
    except Exception:  # noqa: BLE001 - the broker may be what failed: no hint then
        return ""
    if submission_state(meta)[0] != "stopped":
        return ""
    inputs = meta["inputs"].split("\n") if meta.get("inputs") else []
    return f"; resume it: {resume_command(job.id, inputs)}"
