"""Where a job lives in Redis: key names, the one idempotent write of a chunk result, the stop check.

Plain data, no Redis import: the worker (which writes results) and the client (which
creates jobs, writes the producer's own answers, and reads everything) share this one
definition instead of two copies that could disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.contract.tasks import PRIORITY_SEP, PRIORITY_STEPS

KEY_PREFIX = "sbatch"
COST_FIELDS = ("cpu_ns", "chunk_wall_ns")  # a job's cost in its meta: CPU and wall ns, added by each run


class JobKeys:
    """The Redis key names of one job."""

    def __init__(self, job: str, prefix: str = KEY_PREFIX) -> None:
        self.job = job
        base = f"{prefix}:job:{job}"
        self.meta = f"{base}:meta"  # hash: the job's spec, totals and state
        self.stats = f"{base}:stats"  # hash: chunk -> PartStats JSON (overwritten on redelivery)
        self.arrivals = f"{base}:arrivals"  # list: chunk ids in arrival order (a redelivery may repeat one)
        self.attempts = f"{base}:attempts"  # hash: chunk -> deliveries seen by workers
        self.outbox = f"{base}:outbox"  # hash: chunk -> {"at", "task"}: sent, no result yet
        self.producer = f"{base}:producer"  # string: the token of the one producer allowed to submit
        self.stop = f"{base}:stop"  # string, set by purge (short TTL), cancel (job TTL): stop, write nothing
        self.deliveries = deliveries_key(prefix)  # the workers' hash of messages held (not the job's own)
        self.result_prefix = f"{base}:result:"  # a generate chunk's result
        self.part_prefix = f"{base}:part:"  # a solve chunk's published part: `part:<chunk>:<first row>`
        self.parts_prefix = (
            f"{base}:parts:"  # hash per chunk: first row -> rows of each part; `done` once whole
        )
        self.escalation_prefix = f"{base}:race:"
        self.collected = f"{base}:collected"  # set: parts a `solve` wrote into its output and dropped
        # input splits (`pipeline.engine.splits`): what each split read holds, until the frontier passes it
        self.counts = f"{base}:counts"  # hash: chunk -> "input lines entries"
        self.offsets = f"{base}:offsets"  # hash: chunk -> "first_line first_index", until the chunk is done
        self.frontier = f"{base}:frontier"  # string: the first split not counted yet (`Frontier`)
        self.wake = f"{base}:wake"  # list of at most one token: something arrived (a collector blocks on it)

    def result(self, chunk: int) -> str:
        """Key of one chunk's encoded Part."""
        return f"{self.result_prefix}{chunk}"

    def part(self, chunk: int, row: int) -> str:
        """Key of one published part of a solve chunk (its encoded `Part`)."""
        return f"{self.part_prefix}{chunk}:{row}"

    def parts(self, chunk: int) -> str:
        """Hash of a chunk's published parts: first row -> rows, and `done` once every row is answered."""
        return f"{self.parts_prefix}{chunk}"

    def escalation(self, chunk: int, row: int) -> EscalationKeys:
        """The keys of one puzzle (row `row` of chunk `chunk`) escalated across workers."""
        return EscalationKeys(f"{self.escalation_prefix}{chunk}:{row}")

    def fixed(self) -> list[str]:
        """Every key of the job but the per-chunk results and the stop key (which outlives a purge briefly).
        Whoever writes one after the job's creation checks first, under WATCH of `stop`, that the job is not
        stopped (`job_stopped`): a purge (sets `stop`, then deletes the rest) is never undone by a write."""
        names = ("meta", "stats", "arrivals", "attempts", "outbox", "producer", "collected", "counts")
        return [getattr(self, name) for name in (*names, "offsets", "frontier", "wake")]


class EscalationKeys:
    """The keys of one puzzle escalated across workers (`pipeline.escalation.task`), all with short TTLs
    (their strings keep the word `race`: keys of running jobs). A helper searches while the owner's `lease`
    holds (refreshed every poll) and `stop` (whoever ends the escalation) is absent."""

    def __init__(self, base: str) -> None:
        self.lease = f"{base}:lease"
        self.stop = f"{base}:stop"
        self.entries = f"{base}:entries"  # hash: helper number -> `HelperEntry` JSON
        self.cubes = f"{base}:cubes"  # the cubes' JSON, set once by the first helper to split
        self.refuted = f"{base}:refuted"  # hash: cube -> the clause its refutation proved
        self.clauses = (
            f"{base}:clauses"  # list of `SharedBatch` JSON: refutations, units, short learnt clauses
        )
        self.hold_prefix = f"{base}:hold:"  # `hold:<i>`: cube i's searcher (a lease: a killed one's lapses)

    def hold(self, index: int) -> str:
        """The key holding cube `index`'s searcher."""
        return f"{self.hold_prefix}{index}"


def escalation_over(client: Any, keys: JobKeys, esc: EscalationKeys) -> bool:
    """True when an escalated puzzle needs no more search: its stop key is set, its owner's lease is gone,
    or its job was stopped or is gone (at most four EXISTS)."""
    return bool(client.exists(esc.stop)) or not client.exists(esc.lease) or job_stopped(client, keys)


def job_stopped(client: Any, keys: JobKeys) -> bool:
    """True when the job was stopped (its stop key is set: purged or cancelled) or is gone (no metadata).

    `client` is a Redis client or a pipeline in immediate mode (inside WATCH): two EXISTS.
    """
    return bool(client.exists(keys.stop)) or not client.exists(keys.meta)


def queue_lists(queue: str) -> list[str]:
    """The Redis lists kombu keeps the workers' `queue` in, first priority first (`BROKER_PRIORITIES`)."""
    return [queue if p == 0 else f"{queue}{PRIORITY_SEP}{p}" for p in PRIORITY_STEPS]


def queued(client: Any, queue: str) -> int:
    """Messages waiting in the workers' `queue`: its priority lists summed, in one round trip."""
    with client.pipeline(transaction=False) as pipe:
        for name in queue_lists(queue):
            pipe.llen(name)
        return sum(int(n) for n in pipe.execute())


def workers_key(prefix: str = KEY_PREFIX) -> str:
    """Sorted set of live worker processes, scored by their last heartbeat (epoch seconds)."""
    return f"{prefix}:workers"


def roots_key(name: str, prefix: str = KEY_PREFIX) -> str:
    """A live worker process's data roots (JSON, expiring): where clients may send it splits and datasets."""
    return f"{prefix}:roots:{name}"


def current_key(prefix: str = KEY_PREFIX) -> str:
    """Hash: worker process name -> `job:chunk` it is solving now (to tell lost chunks from running ones)."""
    return f"{prefix}:current"


def deliveries_key(prefix: str = KEY_PREFIX) -> str:
    """Hash: `job:chunk` -> `delivery tag|epoch s` of each chunk message a worker took whose result is not
    stored yet (what the workers' orphan sweep reads: no broker internals)."""
    return f"{prefix}:deliveries"


DROP_REASONS = ("unreadable", "refused", "undecodable", "invalid", "unknown_format", "unknown_task")


def dropped_key(prefix: str = KEY_PREFIX) -> str:
    """Hash: why workers dropped messages (one of `DROP_REASONS`) -> how many (`/metrics` reads it)."""
    return f"{prefix}:dropped"


def escalations_key(prefix: str = KEY_PREFIX) -> str:
    """Sorted set: `job:chunk:row` of each puzzle escalated across workers now, scored by its owner's lease's
    end (epoch s): `/metrics` counts those not lapsed without a scan of the escalations' own keys."""
    return f"{prefix}:escalations"


def cost_commands(keys: JobKeys, cost: tuple[int, int]) -> list[tuple[Any, ...]]:
    """The commands adding a run's cost (CPU ns, wall ns: `pipeline.engine.gather.Meter`) to its job's meta,
    in the MULTI that publishes what the run made: a count is never lost or doubled between the two."""
    return [("HINCRBY", keys.meta, field, int(ns)) for field, ns in zip(COST_FIELDS, cost, strict=True) if ns]


def result_commands(
    keys: JobKeys,
    chunk: int,
    payload: bytes,
    stats_json: str,
    n: int,
    cpu_s: float,
    ttl: int,
    cost: tuple[int, int] = (0, 0),
) -> list[tuple[Any, ...]]:
    """The commands that store one (generate) chunk result, to run in one MULTI/EXEC: each overwrites or is
    harmless when repeated (a redelivered chunk replaces its result; only the sizing hint may count it
    twice); the chunk leaves the outbox and the workers' deliveries with it (no resend, no orphan sweep)."""
    return [
        ("SET", keys.result(chunk), payload, "EX", ttl),
        *_arrival_commands(keys, chunk, stats_json, n, cpu_s, ttl, cost),
        *_done_commands(keys, chunk),
    ]


def _arrival_commands(
    keys: JobKeys, arrival: int | str, stats_json: str, n: int, cpu_s: float, ttl: int, cost: tuple[int, int]
) -> list[tuple[Any, ...]]:
    """A chunk result's or part's stats and arrival, the collector woken, the sizing hint and the cost."""
    return [
        ("HSET", keys.stats, arrival, stats_json),
        ("RPUSH", keys.arrivals, arrival),
        *wake_commands(keys, ttl),
        ("HINCRBY", keys.meta, "hint_n", n),
        ("HINCRBYFLOAT", keys.meta, "hint_cpu", f"{cpu_s:.6f}"),
        *cost_commands(keys, cost),
        *[("EXPIRE", key, ttl) for key in (keys.stats, keys.arrivals, keys.meta)],
    ]


def _done_commands(keys: JobKeys, chunk: int) -> list[tuple[Any, ...]]:
    return [("HDEL", keys.outbox, chunk), ("HDEL", keys.deliveries, f"{keys.job}:{chunk}")]


def wake_commands(keys: JobKeys, ttl: int) -> list[tuple[Any, ...]]:
    """Wake the job's collector (blocked on `wake`): one token at most, whatever arrived meanwhile."""
    return [("LPUSH", keys.wake, 1), ("LTRIM", keys.wake, 0, 0), ("EXPIRE", keys.wake, ttl)]


def part_commands(
    keys: JobKeys,
    chunk: int,
    row: int,
    payload: bytes,
    stats_json: str,
    n: int,
    cpu_s: float,
    ttl: int,
    complete: bool,
    runs: list[tuple[int, int]] | None = None,
    cost: tuple[int, int] = (0, 0),
) -> list[tuple[Any, ...]]:
    """The commands that publish one part of a solve chunk in one MULTI/EXEC (under WATCH of the chunk's
    parts hash and the stop key, none of its rows answered: each row is answered once): its payload, its
    row `runs` (default the one run of `n` rows from `row`) in the parts hash, its stats and arrival; once it
    `complete`s the chunk, the chunk leaves the outbox and deliveries and counts as finished."""
    commands: list[tuple[Any, ...]] = [
        ("SET", keys.part(chunk, row), payload, "EX", ttl),
        ("HSET", keys.parts(chunk), *[x for run in runs or [(row, n)] for x in run]),
        ("EXPIRE", keys.parts(chunk), ttl),
        *_arrival_commands(keys, f"{chunk}:{row}", stats_json, n, cpu_s, ttl, cost),
    ]
    if complete:
        commands += [("HSET", keys.parts(chunk), "done", 1), ("HDEL", keys.offsets, chunk)]
        commands += [*_done_commands(keys, chunk), ("HINCRBY", keys.meta, "chunks_done", 1)]
    return commands


def published_rows(raw: dict[Any, Any]) -> list[tuple[int, int]] | None:
    """A chunk's parts hash as (first row, rows) pairs; None once the chunk is done."""
    out = []
    for field, value in raw.items():
        name = field.decode() if isinstance(field, bytes) else str(field)
        if name == "done":
            return None
        out.append((int(name), int(value)))
    return sorted(out)


@dataclass(slots=True)
class Frontier:
    """How far a job's splits are counted: split `chunk` is the first not counted; it starts at line `line`
    and index `index` if it belongs to input `input` (line 1 of its input otherwise). A split's offsets are
    the counts of the splits before it summed: whoever publishes a split's counts moves the frontier over
    every split counted by then (`advance`)."""

    chunk: int = 0
    input: int = 0
    line: int = 1
    index: int = 0

    @classmethod
    def parse(cls, raw: Any) -> Frontier:
        """The frontier as stored (the start when there is none)."""
        if not raw:
            return cls()
        chunk, input_no, line, index = _numbers(raw)
        return cls(chunk, input_no, line, index)

    def text(self) -> str:
        return f"{self.chunk} {self.input} {self.line} {self.index}"

    def advance(self, counts: list[tuple[int, int, int] | None]) -> list[tuple[int, int, int]]:
        """Move over the splits from `chunk` on whose counts (input, lines, entries) are known, in order,
        stopping at the first unknown; return the (chunk, first line, first index) of each split passed."""
        out = []
        for count in counts:
            if count is None:
                break
            input_no, lines, entries = count
            if input_no != self.input:  # a new input: its lines start at 1 again
                self.input, self.line = input_no, 1
            out.append((self.chunk, self.line, self.index))
            self.chunk, self.line, self.index = self.chunk + 1, self.line + lines, self.index + entries
        return out


def split_count(raw: Any) -> tuple[int, int, int] | None:
    """A split's stored counts (input, lines, entries), or None."""
    if raw is None:
        return None
    input_no, lines, entries = _numbers(raw)
    return input_no, lines, entries


def _numbers(raw: Any) -> list[int]:
    return [int(x) for x in (raw.decode() if isinstance(raw, bytes) else str(raw)).split()]
