"""What a command says on stderr of a broker job: while it waits, once, that no worker lives (nothing else
tells: the progress bar only stands still) or that the submission stopped half way (the wait goes on until
`producer_stale_s`), with what to do; when it leaves the job, how far it got and how to go on."""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from client.args import broker_option, resume_command
from client.numbers import plural
from client.store import Checkpoint, input_names, submission_state, submitted_words

if TYPE_CHECKING:
    from client.job import Job

NO_WORKER_S = 10.0  # seconds without a live worker before the notice
log = logging.getLogger(__name__)
CHECK_EVERY_S = 2.0  # what a notice says is read at most this often
START_WORKER = "sudoku-batch worker --broker URL"


class StoppedNotice:
    """Says once the line `explain()` gives (None: nothing to say yet), reading it at most every
    CHECK_EVERY_S; a broker that does not answer says nothing (the wait reports that, not the notice)."""

    what = "the submission's state"  # what `_line` reads, for the log line when the broker does not answer

    def __init__(
        self,
        explain: Callable[[], str | None],
        say: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.explain = explain
        self.say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self.clock = clock
        self._checked = -1e18
        self._said = False

    def _line(self, now: float) -> str | None:
        """The line to say now (None: nothing)."""
        return None if self._said else self.explain()

    def check(self) -> bool:
        """Say the line if there is one now and it was not said; True when it was said now."""
        now = self.clock()
        if now - self._checked < CHECK_EVERY_S:
            return False
        self._checked = now
        try:
            line = self._line(now)
        except Exception as exc:  # noqa: BLE001 - the broker is away: the wait reports that, not this notice
            log.debug("%s could not be read: %s", self.what, exc)
            return False
        if line is None or self._said:
            return False
        self._said = True
        self.say(line)
        return True


class NoWorkerNotice(StoppedNotice):
    """Says once when `live()` (live worker processes) stayed 0 for `after` s; again after workers left."""

    what = "the live workers"

    def __init__(
        self,
        live: Callable[[], int],
        say: Callable[[str], None] | None = None,
        after: float = NO_WORKER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(lambda: None, say, clock)
        self.live = live
        self.after = after
        self._since = clock()  # no worker seen since then

    def _line(self, now: float) -> str | None:
        if self.live():
            self._since, self._said = now, False
            return None
        if now - self._since < self.after:
            return None
        return f"waiting: no live worker on the broker for {self.after:g} s; start one: {START_WORKER}"


def stopped_submission(job: Job, args: argparse.Namespace) -> str | None:
    """What a collection waits for when the job's submission stopped half way (a `collect` after a `submit`
    that died), or None."""
    if job.producing:  # this process's own producer reads on (one that died fails the collection)
        return None
    meta = job.client.store.meta(job.id)
    submission, silent = submission_state(meta)
    if submission != "stopped" or meta.get("state") != "producing" or silent is None:
        return None  # a producer that said it left, or a failed job: the collection ends at once
    left = max(0.0, job.client.settings.producer_stale_s - silent)
    return (
        f"waiting: the job's submission stopped after {submitted_words(meta)} (its producer "
        f"silent for {silent:.0f} s: killed?); what it sent is collected, then this gives up in {left:.0f} s "
        f"unless it is resumed: {resume_command(job.id, input_names(meta), broker_option(args))}"
    )


def _meta_after_interrupt(job: Job) -> dict[str, str]:
    """The job's metadata, or {} when the broker cannot say; idle connections dropped first (one may hold an
    unread reply)."""
    try:
        job.client.store.drop_idle_connections()
        return job.client.store.meta(job.id)
    except Exception as exc:  # noqa: BLE001 - the broker may be what was interrupted: say what is known
        log.debug("job %s: no metadata after the interrupt: %s", job.id, exc)
        return {}


def how_far(job: Job, written: int) -> str:
    """`N of M puzzles`, or `of M+ read so far` (the input still read or stopped), or `of M+ counted so far`
    (splits)."""
    meta = _meta_after_interrupt(job)
    if "total" in meta:
        return f"{written:,} of {plural(int(meta['total']), 'puzzle')}"
    if meta.get("splits"):  # the producer reads no puzzle: the workers count them
        try:
            counted = job.client.store.split_counted(job.id)
        except Exception as exc:  # noqa: BLE001 - the broker may be what was interrupted: say what is known
            log.debug("job %s: no split count after the interrupt: %s", job.id, exc)
            counted = 0
        return f"{written:,} of {max(counted, written):,}+ puzzles counted so far"
    if "submitted" in meta:  # the producer's beat may be a second old: its checkpoint is not
        read = max(int(meta["submitted"]), Checkpoint.of(meta).index, written)
        return f"{written:,} of {read:,}+ puzzles read so far"
    return plural(written, "puzzle")


def say_how_to_go_on(job: Job, args: argparse.Namespace) -> None:
    """After an interrupt in broker mode: the job goes on without us; how to finish it, or delete it."""
    out = f" -o {shlex.quote(args.output)}" if getattr(args, "output", None) not in (None, "-") else ""
    broker = broker_option(args)
    lines = [f"job {job.id} goes on without this command"]
    meta = _meta_after_interrupt(job)  # the broker may be away: the commands still apply
    done = job.stopped_words()  # this process's own producer: known without the broker
    if done is None and not job.submitted_here and meta.get("state") != "produced" and "checkpoint" in meta:
        done = submitted_words(meta)  # `collect` interrupted: its job's submission stopped earlier
    if done is not None:
        resume = resume_command(job.id, input_names(meta) or job.input_names, broker)
        lines.append(f"its submission stopped after {done}: {resume}")
    if args.command != "submit":
        lines.append(f"collect it: sudoku-batch collect {job.id}{broker}{out}")
    lines.append(f"or delete it: sudoku-batch purge {job.id}{broker}")
    print("\n".join(lines), file=sys.stderr)


def resume_hint(job: Job, args: argparse.Namespace) -> str:
    """`; resume it: ...` when the job's submission stopped half way and a resume can finish it, else ``."""
    if job.client.embedded or job.producing:
        return ""
    try:
        meta = job.client.store.meta(job.id)
    except Exception as exc:  # noqa: BLE001 - the broker may be what failed: no hint then
        log.debug("job %s: no resume hint: %s", job.id, exc)
        return ""
    if submission_state(meta)[0] != "stopped":
        return ""
    return f"; resume it: {resume_command(job.id, input_names(meta), broker_option(args))}"
