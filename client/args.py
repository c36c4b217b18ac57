"""Command-line values checked at the edge: exit codes, usage errors, the broker, inputs, counts and seconds.
Shared by the commands and the grammar (`client.cli`, which imports the commands): it imports none of them."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

from client.config import ClientSettings, check_broker_url
from pipeline.contract.tasks import JOB_ID_PATTERN
from pipeline.engine.storage import is_url

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
LOCAL_BROKER = "redis://127.0.0.1:6379/0"  # `worker` and `health` without a broker: a Redis on this machine
ERROR_PREFIX = "sudoku-batch: error: "  # argparse's own (`prog: error:`): every error line of every command
Option = tuple[tuple[str, ...], dict[str, Any]]  # an option table's row: (flags, `add_argument`'s keywords)


def add_options(p: argparse.ArgumentParser, options: list[Option]) -> None:
    """Add an option table's rows to `p` in order (the order --help lists them)."""
    for flags, keywords in options:
        p.add_argument(*flags, **keywords)


class UsageError(Exception):
    """A mistake in the command line (exit 2)."""


def say_error(message: str) -> None:
    """Print one error line on stderr, with the prefix every error of the command line has."""
    print(f"{ERROR_PREFIX}{message}", file=sys.stderr, flush=True)


def broker_url(args: argparse.Namespace, settings: ClientSettings, required: bool) -> str | None:
    """The broker from --broker or SUDOKU_BATCH_BROKER (UsageError if required and missing, or malformed)."""
    url = args.broker or settings.broker
    if not url:
        if required:
            raise UsageError(f"{args.command} needs a broker: --broker URL or SUDOKU_BATCH_BROKER")
        return None
    try:
        check_broker_url(url)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return url


def broker_or_local(args: argparse.Namespace, settings: ClientSettings) -> str:
    """The broker from --broker or SUDOKU_BATCH_BROKER, else LOCAL_BROKER, saying so on stderr (a
    worker or a probe silently on another Redis than the client's would wait for ever)."""
    url = broker_url(args, settings, False)
    if url is None:
        print(f"no --broker and no SUDOKU_BATCH_BROKER: using {LOCAL_BROKER}", file=sys.stderr, flush=True)
    return url or LOCAL_BROKER


def check_job_id(job: str) -> str:
    """The job id itself when it has the form of one (8 to 64 hex digits, as `submit` prints them);
    UsageError naming it otherwise, before the broker is touched (`purge '*'` must create no key)."""
    if not re.fullmatch(JOB_ID_PATTERN, job):
        shown = job if len(job) <= 80 else f"{job[:80]}..."
        raise UsageError(
            f"{shown!r} is not a job id: job ids are 8 to 64 hex digits, as `submit` prints them"
        )
    return job


def time_limit(text: str) -> float:
    """`--time-limit`'s value: seconds, with `none` (any case) for no limit, as 0 is."""
    return 0.0 if text.strip().lower() == "none" else float(text)


def check_seconds(flag: str, value: float | None, most: float, zero: str | None = None) -> None:
    """UsageError unless `value` (given as `flag`) is None or seconds in (0, `most`] (nan and inf are not);
    with `zero` (what 0 means), 0 is accepted too."""
    if value is None or (zero is not None and value == 0):
        return
    if not 0 < value <= most:  # false for nan as well
        also = f"0 ({zero}) or " if zero is not None else ""
        raise UsageError(f"{flag} {value:g}: must be {also}above 0 and at most {most:g} seconds")


def check_processes(flag: str, value: int | None) -> None:
    """UsageError unless `value` (given as `flag`) is None or a process count this machine can run."""
    from client.pool import check_workers

    if value is not None:
        try:
            check_workers(value)
        except ValueError as exc:
            raise UsageError(f"{flag} {exc}") from None


def broker_option(args: argparse.Namespace) -> str:
    """` --broker URL` as this command was given it (a password masked), for the commands it prints
    to go on; `` when the broker came from SUDOKU_BATCH_BROKER (the same shell has it)."""
    import shlex

    from client.config import mask_url

    url = getattr(args, "broker", None)
    return f" --broker {shlex.quote(mask_url(url))}" if url else ""


def resume_command(job: str, inputs: list[str], broker: str = " --broker URL") -> str:
    """The command resuming `job`'s submission: its inputs as recorded; `broker`: `broker_option`'s."""
    import shlex

    names = " ".join(shlex.quote(name) for name in inputs) or "INPUT..."
    return f"sudoku-batch submit --resume {job} {names}{broker}"


def input_sources(names: list[str]) -> list[tuple[str, str]]:
    """Check the inputs are readable regular files or URLs (a usage error naming the input if not); `-` is
    stdin, once. A pipe or a device can be read once, and inputs are peeked at first: pipe them to `-`."""
    from pipeline.engine.storage import StorageError, reason, storage_for

    if names.count("-") > 1:
        raise UsageError("stdin (-) can be read only once")
    for name in names:
        path = Path(name)
        if name == "-" or path.is_file() and os.access(path, os.R_OK):
            continue
        if is_url(name):  # fsspec: s3://, gs://, ... (a usage error when no backend or no such object)
            try:
                storage_for(name).size(name)
            except StorageError as exc:
                raise UsageError(str(exc)) from None
            except FileNotFoundError:
                raise UsageError(f"{name}: no such file") from None
            except Exception as exc:  # noqa: BLE001 - a backend's own errors (credentials, network): one line
                raise UsageError(f"{name}: {reason(exc)}") from None
            continue
        if path.is_dir():
            raise UsageError(f"{name}: is a directory, not a file of puzzles")
        if path.is_file():
            raise UsageError(f"{name}: permission denied")
        if path.exists():
            raise UsageError(f"{name}: not a regular file (pipe it to `-` instead)")
        raise UsageError(f"{name}: no such file")
    return [(name, name) for name in names]


def data_roots(given: list[str] | None) -> str:
    """A worker's data roots as SUDOKU_BATCH_DATA_ROOTS holds them: each --data-root made absolute, or else
    the variable as it is; UsageError (one line) for a root that cannot be one."""
    from pipeline.engine.roots import DataRoots
    from pipeline.engine.storage import absolute

    if given is None:
        texts = os.environ.get("SUDOKU_BATCH_DATA_ROOTS", "").split(",")
    else:
        for root in given:
            if not root.strip() or "," in root:
                raise UsageError(
                    f"--data-root {root!r}: give a path or URL without commas "
                    "(SUDOKU_BATCH_DATA_ROOTS separates roots with commas)"
                )
        texts = [absolute(root.strip()) for root in given]
    try:
        DataRoots.parse(texts)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return ",".join(t.strip() for t in texts if t.strip())
