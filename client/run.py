"""The `solve`, `submit` and `collect` commands: drive a Job, write its output, progress and summary."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from client.args import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    broker_url,
    check_job_id,
    check_processes,
    check_seconds,
    input_sources,
    say_error,
)
from client.batch import BatchClient
from client.collector import JobFailed
from client.config import ClientSettings, mask_url
from client.dataset import DatasetOutput, dataset_url, is_dataset
from client.job import Job, Written
from client.notice import (
    NoWorkerNotice,
    StoppedNotice,
    how_far,
    resume_hint,
    say_how_to_go_on,
    stopped_submission,
)
from client.numbers import plural
from client.output import Output
from client.progress import Progress
from client.store import Checkpoint, Superseded
from client.summary import Summary
from client.target import ReaderGone, check_target
from pipeline.contract.formats import format_of, named_format
from pipeline.contract.tasks import (
    DEFAULT_PRIORITY,
    DEFAULT_TIME_LIMIT_S,
    MAX_ESCALATE_AFTER_S,
    MAX_TIME_LIMIT_S,
)

MAX_WAIT_S = 7 * 86400.0  # `collect --timeout`: no result waits longer in the broker (the job TTL)
STOP_WAIT_S = 2.0  # seconds a stopped producer may take to finish its step (a blocked read is left behind)


def run_command(args: argparse.Namespace, settings: ClientSettings) -> int:
    """Run solve, submit or collect; return the exit code. Every way out stops what the command started (a
    failed collection no longer waits for a producer); an interrupt kills the local processes at once and,
    with a broker, leaves the job resumable and says how to go on."""
    if args.command == "collect" and is_dataset(args.job):  # `collect DIR/ -o FILE`: a dataset merged
        return _merge_dataset(args)
    url = broker_url(args, settings, required=args.command != "solve")
    resume = getattr(args, "resume", None)
    sources = _check_inputs(args, resume)
    dataset = _check_output(args)
    workers = getattr(args, "workers", None)
    check_processes("--workers", workers)
    client = BatchClient(url, workers=workers, settings=settings, daemon=True)
    job: Job | None = None
    try:
        if args.command == "collect":
            job = client.job(args.job)
            return _collect(job, args, purge=False, idle_timeout=args.timeout)
        job = _start_job(client, args, sources, resume, dataset)
        if job.note:  # this machine reads inputs the workers may not: said even with -q (how to change it)
            print(job.note, file=sys.stderr, flush=True)
        if args.command == "submit":
            return _submit(job, args)
        return _collect(job, args, purge=not client.embedded, idle_timeout=None)
    except ReaderGone:  # `solve ... | head -1`: no one wants the rest; a job started here goes too
        client.kill()
        if job is not None and args.command != "collect":
            job.cancel(wait=STOP_WAIT_S)
            job.purge()
        raise
    except KeyboardInterrupt:
        client.kill()  # at once: the chunks in flight are dropped
        if job is not None:
            job.cancel(fail=client.embedded, wait=STOP_WAIT_S)
            if not client.embedded:
                say_how_to_go_on(job, args)
        raise
    finally:
        if job is not None and job.producing:  # the collection failed: its producer must not run on
            job.stop_reading(wait=STOP_WAIT_S)  # not `cancel`: the job failed, no user cancelled it
        client.close()


def _check_inputs(args: argparse.Namespace, resume: str | None) -> list[tuple[str, str]]:
    """The inputs of solve or submit (none for collect), every number bounded: UsageError before any work."""
    if resume is not None:
        check_job_id(resume)
    if args.command == "collect":
        check_job_id(args.job)
        check_seconds("--timeout", args.timeout, MAX_WAIT_S)
        return []
    if not args.inputs and not resume:
        raise UsageError(f"{args.command} needs at least one INPUT")
    sources = input_sources(args.inputs)
    check_seconds("--time-limit", args.time_limit, MAX_TIME_LIMIT_S, zero="no limit")
    check_seconds("--escalate-after", args.escalate_after, MAX_ESCALATE_AFTER_S, zero="never")
    return sources


def _check_output(args: argparse.Namespace) -> bool:
    """Whether `-o` names a dataset; sets the records' format from `-o`'s extension; UsageError, before any
    work, for an output that cannot be written in it."""
    dataset = is_dataset(getattr(args, "output", None))
    _check_dataset_options(args, dataset)
    if args.command != "submit" and not (
        args.command == "collect" and args.format is None and named_format(args.output) is None
    ):  # collect: the job's own
        try:
            args.format = format_of(args.output, args.format)  # -o out.csv: CSV
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if args.format == "parquet":
            check_parquet(args.output, dataset)
    if not dataset:
        _check_file(getattr(args, "output", None))
    return dataset


def _start_job(
    client: BatchClient,
    args: argparse.Namespace,
    sources: list[tuple[str, str]],
    resume: str | None,
    dataset: bool,
) -> Job:
    """Submit the inputs as a new job, or resume `resume` from its checkpoint; a bad value is a UsageError."""
    try:
        if resume:  # the job's own limit, unless one is given (to be checked against it)
            return client.resume(
                resume,
                [src for _, src in sources] or None,
                time_limit=args.time_limit or None,
                portfolio=args.portfolio,
                box=args.box,
                bounded=False,
                column=args.column,
                priority=args.priority,
            )
        limit = DEFAULT_TIME_LIMIT_S if args.time_limit is None else args.time_limit or None
        return client.submit_inputs(
            sources,
            time_limit=limit,
            portfolio=args.portfolio,
            box=args.box,
            bounded=args.command == "solve",
            escalate_after=args.escalate_after,
            format=args.format or "jsonl",
            dataset=args.output if dataset else None,
            compression=args.compression or "none",
            splits=False if args.no_splits else None,
            column=args.column,
            priority=args.priority or DEFAULT_PRIORITY,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _check_dataset_options(args: argparse.Namespace, dataset: bool) -> None:
    """UsageError for options that do not go with the output: a dataset (`-o DIR/`) or a file."""
    output = getattr(args, "output", None)
    if args.command == "submit" and output is not None and not dataset:
        raise UsageError(
            f"submit -o {output}: submit writes no file (collect does); -o names a dataset: DIR/"
        )
    compression = getattr(args, "compression", None)
    if args.command in ("solve", "submit") and not dataset and compression not in (None, "none"):
        raise UsageError("--compression applies to a dataset (-o DIR/); a file is compressed when named .gz")
    if dataset and getattr(args, "ordered", False):
        raise UsageError("--ordered: a dataset is one table, its manifest lists the parts in input order")
    if dataset and args.format is None and args.command != "collect":
        args.format = "jsonl"


def check_parquet(output: str | None, dataset: bool = False) -> None:
    """UsageError, before any work, when Parquet cannot be written: no pyarrow (not imported here for a
    dataset: the workers write it), or a terminal to write to."""
    from pipeline.engine.render.parquet import INSTALL_HINT, available, installed

    if not (installed() if dataset else available()):
        raise UsageError(f"--format parquet needs pyarrow: {INSTALL_HINT}")
    if output in (None, "-") and sys.stdout is not None and sys.stdout.isatty():
        raise UsageError("--format parquet writes binary: give a file with -o FILE (or pipe stdout)")


def _submit(job: Job, args: argparse.Namespace) -> int:
    """Print the job id at once, then finish sending the input (ReaderGone if no one can read the id)."""
    try:
        print(job.id, flush=True)
    except BrokenPipeError:
        raise ReaderGone("the reader of stdout closed it before the job id") from None
    try:
        job.wait_submitted()
    except Exception as exc:  # noqa: BLE001 - reported in one line
        say_error(f"job {job.id}: {mask_url(str(exc))}{resume_hint(job, args)}")
        return EXIT_FAILED
    return EXIT_OK


def _collect(job: Job, args: argparse.Namespace, purge: bool, idle_timeout: float | None) -> int:
    """Write every result of `job` (`Job.write`), with progress and summary; exit 1 if the job cannot finish.
    Broker `solve` into a file acks parts once durable, so `collect JOB -o FILE` finishes a killed one from
    that length (docs/pipeline.md); interrupted or cancelled, the whole records written so far are kept."""
    meta = job.client.store.meta(job.id)
    if args.format is None:  # `collect`, no --format nor a named extension: what the job's workers render
        job_format = meta.get("format", "columns")
        args.format = "jsonl" if job_format == "columns" else job_format
    summary = Summary()
    progress = Progress(args.progress or sys.stderr.isatty())
    try:
        output, written, acking, merge_to = _open_output(job, args, meta, summary, progress)
    except JobFailed as exc:
        say_error(f"job {job.id}: {exc}")
        return EXIT_FAILED
    wait, refresh = _watch(job, args, progress, written)
    interrupted = failed = cancelled = False
    committed = ""  # a dataset's commit: where, how many records
    try:
        # broker: results stay until the output is complete (a killed solve is finished by `collect`);
        # embedded: nothing can read them again, so each is freed once written
        job.write(
            output,
            summary,
            written,
            ordered=args.ordered,
            keep=not job.client.embedded,
            acked=acking,
            idle_timeout=idle_timeout,
            on_wait=wait,
            on_write=refresh,
        )
        if written.manifest is not None:
            committed = f"dataset {output.path} committed: {plural(written.manifest.records, 'record')} in "
            committed += plural(len(written.manifest.parts), "part file")
            if merge_to is not None:
                _merge(output.url, merge_to, args.format, progress.say)  # type: ignore[union-attr]
                committed += f", merged into {merge_to}"
    except (JobFailed, ConnectionError, OSError, RuntimeError, ValueError) as exc:  # FormatMismatch too
        failed = True  # every record may be written yet the commit or the merge failed: never exit 0
        progress.close()
        # cancelled: every record it has is written; the file is kept with them (still exit 1: not all)
        cancelled = isinstance(exc, JobFailed) and isinstance(output, Output) and _cancelled(job)
        where = args.output or "stdout"
        kept = f": its {plural(written.rows, 'record')} kept in {where}" if cancelled else ""
        say_error(f"job {job.id}: {mask_url(str(exc))}{kept}{resume_hint(job, args)}")
    except KeyboardInterrupt:
        interrupted = True
        progress.close()
        raise
    finally:
        summary.finish()
        output.close(keep=written.complete or interrupted or cancelled)
        if written.complete:
            progress.update(written.rows, written.rows, written.rows, force=True)
        progress.close()
        if interrupted:
            where = (output.path if isinstance(output, DatasetOutput) else args.output) or "stdout"
            print(f"interrupted: {how_far(job, written.rows)} written to {where}", file=sys.stderr)
    return _finish(job, args, summary, purge, committed) if written.complete and not failed else EXIT_FAILED


def _cancelled(job: Job) -> bool:
    """True when the job was cancelled (what a collection of it found is all it will have)."""
    try:
        return bool(job.client.store.meta(job.id).get("cancelled"))
    except Exception as exc:  # noqa: BLE001 - the broker went: the output is not kept, as for a failure
        logging.getLogger(__name__).warning("job %s: not known whether it was cancelled: %s", job.id, exc)
        return False


def _open_output(
    job: Job, args: argparse.Namespace, meta: dict[str, str], summary: Summary, progress: Progress
) -> tuple[Output | DatasetOutput, Written, bool, str | None]:
    """The output, how far an earlier collection wrote it (its parts' statistics added to `summary`), whether
    parts leave Redis once safely in it, a dataset's merge file; JobFailed when it cannot be gone on with."""
    store = job.client.store
    earlier, parts_done = ({}, set()) if job.client.embedded else store.collected(job.id)
    dataset = meta.get("dataset")
    written = Written()
    if dataset:  # its parts are durable where the workers wrote them
        merge_to = _dataset_collection(job.id, dataset, meta, args)
        output = DatasetOutput(dataset, meta.get("format", "jsonl"), job.id, meta, summary, cost=job.cost)
        if earlier.get("dataset") and parts_done:  # an earlier collection took these parts: known again
            written = Written(parts_done, int(earlier.get("rows", 0)))
            for (chunk, row), stats in store.part_stats(job.id, sorted(parts_done)):  # type: ignore[attr-defined]
                summary.add(stats, stats.file.input if stats.file else "")
                output.take(chunk, row, stats.file.input if stats.file else "", stats)
        return output, written, not job.client.embedded, merge_to
    resume = _resume_from(earlier, args) if earlier else None
    out = Output(args.output, args.format, progress.say, *(resume or (None, 0)))
    if resume is not None:
        written = Written(parts_done, int(earlier.get("rows", 0)))
        for _, stats in store.part_stats(job.id, sorted(parts_done)):  # type: ignore[attr-defined]
            summary.add(stats, "")
    acking = not job.client.embedded and out.resumable and (args.command == "solve" or resume is not None)
    return out, written, acking, None


def _watch(
    job: Job, args: argparse.Namespace, progress: Progress, written: Written
) -> tuple[Callable[[], None], Callable[[], None]]:
    """What a collection calls as it waits (our producer's death, progress, notices) and after each slice."""
    store = job.client.store
    notices: list[NoWorkerNotice | StoppedNotice] = []
    if not job.client.embedded:
        after = job.client.settings.no_worker_notice_s
        notices.append(NoWorkerNotice(lambda: len(store.live_workers()), progress.say, after=after))
        notices.append(StoppedNotice(lambda: stopped_submission(job, args), progress.say))
    total: list[int | None] = [None, 0]  # (total once known, submitted so far)
    last_meta = [0.0]

    def refresh() -> None:
        now = time.monotonic()
        if progress.enabled and now - last_meta[0] > 0.5:
            last_meta[0] = now
            meta = store.meta(job.id)
            total[0] = int(meta["total"]) if "total" in meta else None
            total[1] = max(int(meta.get("submitted", 0)), Checkpoint.of(meta).index)  # a beat is a second old
            if total[0] is None and meta.get("splits"):  # read in splits: the workers count the puzzles
                total[1] = store.split_counted(job.id)
        progress.update(written.rows, total[0], total[1])

    def wait() -> None:
        failed = job.producer_error
        if failed is not None and not isinstance(failed, Superseded):  # ours died (not: a resume took over)
            raise JobFailed(f"the producer stopped: {type(failed).__name__}: {failed}")
        refresh()
        for notice in notices:
            notice.check()

    return wait, refresh


def _finish(job: Job, args: argparse.Namespace, summary: Summary, purge: bool, committed: str) -> int:
    """After a complete collection: purge the job when asked, print the summary, write the report."""
    meta = job.client.store.meta(job.id)
    if args.command == "collect":  # the rate of the job, not of this collection
        summary.time_job(float(meta.get("created") or 0.0))
    summary.set_time_limit(float(meta["time_limit"]) if meta.get("time_limit") else None)
    if purge:
        job.purge(stop=False)  # complete: nothing of it runs any more
    if not args.quiet:
        print(summary.text(), file=sys.stderr)
        if committed:  # where a dataset's records are: the job's directory (collect JOB may not know it)
            print(committed, file=sys.stderr)
    if args.report:
        from client.report import report_facts, write_report

        facts = report_facts(job.id, meta, job.client.embedded)
        write_report(summary, args.report, f"sudoku-batch report: {facts['inputs']}", facts)
    return EXIT_OK


def _dataset_collection(job: str, dataset: str, meta: dict[str, str], args: argparse.Namespace) -> str | None:
    """None, or the file a dataset job's records are merged into (`-o FILE`); JobFailed for another one."""
    output = args.output
    if output is None or (is_dataset(output) and dataset_url(output) == dataset):
        return None
    if is_dataset(output):
        raise JobFailed(
            f"the job writes its dataset to {dataset}/: collect it with -o {dataset}/ (or -o FILE)"
        )
    have = meta.get("format", "jsonl")
    if args.format != have:
        raise JobFailed(f"the job's dataset holds {have} records: merge them with --format {have}")
    return output


def _check_file(output: str | None) -> None:
    """UsageError (one line), before any work, when `-o FILE` names what cannot be written (`-`: stdout)."""
    if output not in (None, "-"):
        try:
            check_target(output)
        except ValueError as exc:
            raise UsageError(str(exc)) from None


def _merge_dataset(args: argparse.Namespace) -> int:
    """`collect DIR/ -o FILE`: a committed dataset's parts merged into one file (no broker needed)."""
    from client.dataset import read_manifest

    url = dataset_url(args.job)
    if args.output is None or is_dataset(args.output):
        raise UsageError(f"collect {args.job}: name the file to merge the dataset into with -o FILE")
    try:
        manifest = read_manifest(url)
        have = str(manifest.options.get("format", "jsonl"))
        args.format = format_of(args.output, args.format or named_format(args.output) or have)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.format != have:
        raise UsageError(f"the dataset {url}/ holds {have} records: merge them with --format {have}")
    _check_file(args.output)
    _merge(url, args.output, args.format, Progress(False).say)
    if not args.quiet:
        print(f"{plural(manifest.records, 'record')} of {url}/ merged into {args.output}", file=sys.stderr)
    return EXIT_OK


def _merge(url: str, output: str, fmt: str, say: Any) -> None:
    """Merge a committed dataset's parts into one file (or stdout for `-`)."""
    from client.dataset import copy_dataset

    out = Output(output, fmt, say)
    try:
        copy_dataset(url, out, fmt)
    except BaseException:
        out.close(keep=False)
        raise
    out.close(keep=True)


def _resume_from(earlier: dict[str, Any], args: argparse.Namespace) -> tuple[str, int]:
    """Where an earlier collection left its output (file, durable bytes); JobFailed when this one cannot."""
    rows = int(earlier.get("rows", 0))
    target = os.path.realpath(args.output) if args.output not in (None, "-") else None
    again = f"collect it again with -o {earlier.get('path')}{' --ordered' if earlier.get('ordered') else ''}"
    if earlier.get("path") is None or target != earlier["path"]:
        raise JobFailed(
            f"{rows:,} results were written to {earlier.get('path') or 'a stream'} by an earlier "
            f"collection and are no longer in the broker: {again}"
        )
    if earlier.get("format") != args.format or bool(earlier.get("ordered")) != bool(args.ordered):
        raise JobFailed(f"the earlier collection wrote {earlier.get('format')} records: {again}")
    size = int(earlier.get("bytes", 0))
    for path in (earlier.get("part"), earlier["path"]):
        if path and os.path.isfile(path) and os.path.getsize(path) >= size:
            return path, size
    raise JobFailed(f"the output of the earlier collection ({size:,} bytes, {rows:,} results) is gone")
