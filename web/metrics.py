"""`/metrics`: the fleet in the Prometheus text format, from the keys the page and `status` read.

A scrape is one pipelined round trip (each listed job's metadata fields and arrivals since the last scrape,
the fleet's keys), then one for the new parts' statistics, each part read once (at most MAX_PARTS_READ a
scrape; docs/decisions.md). Every label's values are bounded: the page's job ids, `STATUS_NAMES`, `PHASES`,
`DROP_REASONS`, at most MAX_HOSTS hosts.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from client.redis_store import LIVE_WORKER_S, RedisJobStore
from client.store import job_cost, job_phase
from pipeline.contract.keys import DROP_REASONS, deliveries_key, dropped_key, escalations_key, workers_key
from solvers.model.status import STATUS_NAMES
from web.backend import Backend, phase_shown

log = logging.getLogger(__name__)
PREFIX = "sudoku_batch_"
RATE_WINDOW_S = 30.0  # `puzzles_per_second`: puzzles answered in this many seconds before the scrape
MAX_HOSTS = 1000  # `worker_processes` labels: a Redis written by a stranger cannot grow them further
MAX_HOST_CHARS = 200
# the fields of a job's metadata its phase and cost are computed from (`client.store.job_phase`): not the rest
META_FIELDS = (
    "created",
    "state",
    "total",
    "splits",
    "kind",
    "cancelled",
    "checkpoint",
    "producer_beat",
    "cpu_ns",
)
MAX_PARTS_READ = 5000  # part statistics one scrape reads, shared by the jobs (~11 us of CPU each)
PHASES = ("submitting", "stopped", "solving", "done", "failed", "cancelled", "generating", "unknown")
STATUSES = frozenset(STATUS_NAMES)
# name (without the prefix) -> (type, help, labels): every family `/metrics` exports, declared once
FAMILIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "chunks_queued": ("gauge", "Chunk messages waiting in the workers' queue (every priority list)", ()),
    "chunks_in_flight": ("gauge", "Chunk messages taken by workers whose result is not stored yet", ()),
    "jobs": ("gauge", "Jobs on the broker (the page's list) by phase", ("phase",)),
    "puzzles_total": ("counter", "Puzzles answered, by job and status", ("job", "status")),
    "puzzles_per_second": ("gauge", f"Puzzles answered by the fleet per second over {RATE_WINDOW_S:g} s", ()),
    "worker_processes": ("gauge", "Live worker processes (beat in the last 20 s) by host", ("host",)),
    "escalated_puzzles": ("gauge", "Puzzles escalated across worker processes now", ()),
    "worker_cpu_seconds_total": ("counter", "CPU seconds the workers spent on each job", ("job",)),
    "dropped_messages_total": ("counter", "Messages the workers refused and dropped, by reason", ("reason",)),
    "redis_memory_used_bytes": ("gauge", "Memory Redis uses (INFO used_memory)", ()),
}


def family(name: str) -> Metric:
    """An empty family of `FAMILIES[name]`, named with the prefix."""
    kind, text, labels = FAMILIES[name]
    make = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
    return make(PREFIX + name, text, labels=list(labels))


def exported_names() -> set[str]:
    """The sample names `/metrics` exports (a counter's with `_total`): what a dashboard may query."""
    return {f.name + "_total" if f.type == "counter" else f.name for f in map(family, FAMILIES)}


@dataclass
class Tally:
    """What a job's part statistics add up to, from the first `cursor` entries of its arrival list."""

    cursor: int = 0
    seen: set[str] = field(default_factory=set)  # generate chunks (one redelivered arrives twice): once each
    done: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    recent: list[tuple[float, int]] = field(default_factory=list)  # (end, puzzles) of parts in the window

    def add(self, job: str, names: list[str], values: list[Any]) -> None:
        """Count the parts `names` whose statistics (JSON, as `PartStats` writes them) are `values`; a
        malformed one is left out with one log line (the job's own `status` fails on it)."""
        since = time.time() - RATE_WINDOW_S
        for name, raw in zip(names, values, strict=True):
            if raw is None or name in self.seen:
                continue
            try:
                stats = json.loads(raw)
                n, counts, end = int(stats.get("n", 0)), stats.get("counts") or {}, float(stats.get("end", 0))
                known = {status: int(count) for status, count in counts.items() if status in STATUSES}
            except (ValueError, TypeError, AttributeError) as exc:
                why = "job %s: part %s's statistics are not readable, left out of /metrics: %s"
                log.warning(why, job, name, exc)
                continue
            if ":" not in name:  # a solve part (`chunk:row`) arrives once: its rows are answered once
                self.seen.add(name)
            self.done += n
            for status, count in known.items():
                self.counts[status] = self.counts.get(status, 0) + count
            if end > since:
                self.recent.append((end, n))


class FleetCollector(Collector):
    """Reads the broker once per scrape (see the module docstring) into the families of `FAMILIES`."""

    def __init__(self, backend: Backend) -> None:
        store = backend.client.store
        if not isinstance(store, RedisJobStore):
            raise ValueError("metrics need a broker: the embedded server has no fleet to export")
        self.backend, self.store = backend, store
        self._tallies: dict[str, Tally] = {}
        self._lock = threading.Lock()  # two scrapes at once share the tallies
        self._info_refused = False

    def describe(self) -> Iterator[Metric]:
        return (family(name) for name in FAMILIES)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            out = {name: family(name) for name in FAMILIES}
            self._read(out)
        return iter(out.values())

    def _jobs(self, metas: dict[str, dict[str, str]], now: float, out: dict[str, Metric]) -> None:
        """The families by job: phases, puzzles by status, CPU, and the fleet's recent rate."""
        phases = dict.fromkeys(PHASES, 0)
        recent = 0
        for job, meta in metas.items():
            tally = self._tallies[job]
            phase = self._phase(job, meta, tally.done)
            phases[phase if phase in phases else "unknown"] += 1
            for status, n in sorted(tally.counts.items()):
                out["puzzles_total"].add_metric([job, status], n)
            out["worker_cpu_seconds_total"].add_metric([job], job_cost(job, meta)[0])  # as `status` reads it
            tally.recent = [(end, n) for end, n in tally.recent if end > now - RATE_WINDOW_S]
            recent += sum(n for _, n in tally.recent)
        for phase, n in phases.items():
            out["jobs"].add_metric([phase], n)
        out["puzzles_per_second"].add_metric([], recent / RATE_WINDOW_S)

    def _phase(self, job: str, meta: dict[str, str], done: int) -> str:
        """The job's phase as the page shows it (read in splits: its total once its workers counted it)."""
        total = int(meta["total"]) if meta.get("total", "").isdigit() else None
        if total is None and meta.get("splits") and meta.get("state") == "produced":
            total = self.store.split_total(job)
        phase = job_phase(meta, done, total)
        return phase_shown(phase, done, meta)

    def _read(self, out: dict[str, Metric]) -> None:
        """Each job's metadata and new arrivals, the fleet's keys (one round trip), then the new parts, into
        the families `out`."""
        jobs, prefix, now = self.backend.job_ids(), self.store.prefix, time.time()
        pipe = self.store.r.pipeline(transaction=False)
        cursors = {job: self._tallies[job].cursor if job in self._tallies else 0 for job in jobs}
        most = max(1, MAX_PARTS_READ // max(1, len(jobs)))  # of each job's new parts
        for job in jobs:
            keys = self.store.keys(job)
            pipe.hmget(keys.meta, META_FIELDS)
            pipe.lrange(keys.arrivals, cursors[job], cursors[job] + most - 1)
        pipe.hlen(deliveries_key(prefix))
        pipe.zrangebyscore(workers_key(prefix), now - LIVE_WORKER_S, "+inf")
        pipe.zcount(escalations_key(prefix), now, "+inf")
        pipe.hmget(dropped_key(prefix), list(DROP_REASONS))
        pipe.info("memory")
        replies = pipe.execute(raise_on_error=False)  # INFO may be refused (an ACL, a managed Redis)
        for reply in replies[:-1]:
            if isinstance(reply, Exception):
                raise reply
        n = 2 * len(jobs)
        metas, arrived = {}, {}
        for job, raw, names in zip(jobs, replies[0:n:2], replies[1:n:2], strict=True):
            meta = {k: _s(v) for k, v in zip(META_FIELDS, raw, strict=True) if v is not None}
            if "created" in meta:  # a job purged since the list was scanned is left out
                metas[job], arrived[job] = meta, [_s(name) for name in names]
        self._update_tallies(arrived, cursors)
        in_flight, beats, escalated, dropped, info = replies[n:]
        out["chunks_queued"].add_metric([], self.store.queued())
        out["chunks_in_flight"].add_metric([], int(in_flight))
        self._jobs(metas, time.time(), out)
        for host, count in sorted(hosts([_s(w) for w in beats]).items()):
            out["worker_processes"].add_metric([host], count)
        out["escalated_puzzles"].add_metric([], int(escalated))
        for why, count in zip(DROP_REASONS, dropped, strict=True):
            out["dropped_messages_total"].add_metric([why], 0 if count is None else whole(_s(count)))
        memory = self._memory(info)
        if memory is not None:
            out["redis_memory_used_bytes"].add_metric([], memory)

    def _memory(self, info: Any) -> int | None:
        """Redis's `used_memory` from INFO's reply; None, said once in the log, when INFO was refused."""
        if isinstance(info, Exception):
            if not self._info_refused:
                log.warning("Redis refused INFO: /metrics has no redis_memory_used_bytes (%s)", info)
            self._info_refused = True
            return None
        used = info.get("used_memory") if isinstance(info, dict) else None
        return used if isinstance(used, int) else None

    def _update_tallies(self, arrived: dict[str, list[str]], cursors: dict[str, int]) -> None:
        """Read the statistics of the parts that arrived since the last scrape (one round trip); forget
        the tallies of jobs no longer listed."""
        self._tallies = {job: self._tallies.get(job) or Tally() for job in arrived}
        new = {job: names for job, names in arrived.items() if names}
        if not new:
            return
        pipe = self.store.r.pipeline(transaction=False)
        for job, names in new.items():
            pipe.hmget(self.store.keys(job).stats, names)
        for (job, names), values in zip(new.items(), pipe.execute(), strict=True):
            tally = self._tallies[job]
            tally.add(job, names, values)
            tally.cursor = cursors[job] + len(names)


def hosts(workers: list[str]) -> dict[str, int]:
    """Live worker processes (`host:pid`) counted by host, at most MAX_HOSTS hosts."""
    out: dict[str, int] = {}
    for name in workers:
        host = name.rpartition(":")[0][:MAX_HOST_CHARS] or "?"
        if host in out or len(out) < MAX_HOSTS:
            out[host] = out.get(host, 0) + 1
    return out


def whole(text: str | None) -> int:
    """A non-negative integer field as Redis keeps it; 0 when missing or not one."""
    return int(text) if text and text.isascii() and text.isdigit() and len(text) <= 30 else 0


def _s(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
