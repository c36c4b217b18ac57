"""The end-of-job summary: counts, throughput, time percentiles, wins, costs, invalid lines.

Built from the chunks' statistics only, in bounded memory: solve times as a log-binned histogram (bins 4.7%
wide: percentiles exact to within a bin, the maximum exact). The wall time never holds numba compiling (said
on a line of its own)."""

from __future__ import annotations

import time
from typing import Any

from client import numbers
from pipeline.contract.part import PartStats, Problem, time_bin_ms
from solvers.model.status import SUMMARY_ORDER
from solvers.warm import compile_seconds

MAX_PROBLEMS = 1000
PROBLEMS_SHOWN = 10  # of them in the text summary
PERCENTILES = (("p50", 50), ("p90", 90), ("p99", 99))


class Summary:
    """Accumulates PartStats into the job's summary."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.finished: float | None = None
        self.n = 0
        self.counts: dict[str, int] = {}
        self.wins: dict[str, int] = {}
        self.approx_costs: dict[int, int] = {}
        self.time_bins: dict[int, int] = {}
        self.time_max_ms = 0.0
        self.solve_s = 0.0
        self.cpu_s = 0.0
        self.solver_cpu_s = 0.0
        self.problems: list[tuple[str, Problem]] = []  # (input, problem), first MAX_PROBLEMS by arrival
        self.problems_total = 0
        self.last_end = 0.0  # epoch seconds the last chunk was answered
        self._job_wall_s: float | None = None
        self.limit: str | None = None  # the job's time limit as said (`set_time_limit`); None: not said
        self._compiled = compile_seconds()  # numba's compiles of this command so far (before the clock)
        self.compile_s = 0.0  # seconds the command compiled while the clock ran: not in `wall_s`

    def add(self, stats: PartStats, input_name: str) -> None:
        """Fold one chunk's statistics in."""
        self.n += stats.n
        tallies: tuple[tuple[dict[Any, int], dict[Any, int]], ...] = (
            (self.counts, stats.counts),
            (self.wins, stats.wins),
            (self.approx_costs, stats.approx_costs),
            (self.time_bins, stats.time_bins),
        )
        for table, extra in tallies:
            for k, v in extra.items():
                table[k] = table.get(k, 0) + v
        self.time_max_ms = max(self.time_max_ms, stats.time_max_ms)
        self.last_end = max(self.last_end, stats.end)
        self.solve_s += stats.solve_s
        self.cpu_s += stats.cpu_s
        self.solver_cpu_s += stats.solver_cpu_s
        room = MAX_PROBLEMS - len(self.problems)
        if room > 0:
            self.problems.extend((input_name, p) for p in stats.problems[:room])
        self.problems_total += len(stats.problems) + stats.problems_dropped

    def set_time_limit(self, seconds: float | None) -> None:
        """Say the job's time limit per puzzle in the summary (None: the job had none)."""
        self.limit = "no time limit" if not seconds else f"time limit {numbers.duration(seconds)} per puzzle"

    def finish(self) -> None:
        """Stop the wall clock; the seconds a process of the command compiled meanwhile are not the job's."""
        self.finished = time.monotonic()
        self.compile_s = compile_seconds() - self._compiled

    def time_job(self, created: float) -> None:
        """Time the job itself, from its creation (epoch seconds) to its last answer, instead of this
        process: a `collect` may run long after the job, or join it half way."""
        if self.last_end > created:
            self._job_wall_s = self.last_end - created

    @property
    def wall_s(self) -> float:
        """Seconds from the start to the end (or now); the job's span once `time_job` was called."""
        if self._job_wall_s is not None:
            return self._job_wall_s
        return max((self.finished or time.monotonic()) - self.started - self.compile_s, 0.0)

    @property
    def rate(self) -> float:
        """Puzzles per second of wall time."""
        return self.n / self.wall_s if self.wall_s > 0 else 0.0

    def percentiles(self) -> dict[str, float]:
        """p50, p90, p99 and the exact max of the solve times, in ms, by nearest rank (ceil(p*n/100)-th), read
        as its bin's middle but never above the max, the max itself at rank n (a p99 of < 100 puzzles)."""
        total = sum(self.time_bins.values())
        out: dict[str, float] = {}
        if not total:
            return out
        ordered = sorted(self.time_bins.items())
        for name, percent in PERCENTILES:
            rank = max(1, -(-percent * total // 100))  # ceil in integers: 0.29 * 100 is 28.999...
            seen = 0
            for b, count in ordered:
                seen += count
                if seen >= rank:
                    out[name] = self.time_max_ms if rank == total else min(time_bin_ms(b), self.time_max_ms)
                    break
        out["max"] = self.time_max_ms
        return out

    def done_within(self) -> list[tuple[int, float]]:
        """The cactus plot's points: (puzzles done within t, t in ms) at each time bin, rising in both;
        t is the bin's middle (as for the percentiles), the exact maximum for the last one."""
        points, seen = [], 0
        for b, count in sorted(self.time_bins.items()):
            seen += count
            points.append((seen, min(time_bin_ms(b), self.time_max_ms)))
        if points:
            points[-1] = (seen, self.time_max_ms)
        return points

    def as_dict(self) -> dict[str, Any]:
        """The summary as plain data (for the report and `--json` consumers)."""
        return {
            "puzzles": self.n,
            "counts": {k: self.counts[k] for k in _ordered(self.counts)},
            "wall_s": self.wall_s,
            "puzzles_per_s": self.rate,
            "time_ms": self.percentiles(),
            "wins": dict(sorted(self.wins.items(), key=lambda kv: -kv[1])),
            "approximate_costs": dict(sorted(self.approx_costs.items())),
            "problems_total": self.problems_total,
        }

    def text(self) -> str:
        """The human summary printed on stderr."""
        counts = ", ".join(f"{k} {numbers.count(self.counts[k])}" for k in _ordered(self.counts)) or "nothing"
        limit = f"; {self.limit}" if self.limit else ""
        rate = numbers.per_second(self.rate)
        n = numbers.plural(self.n, "puzzle")
        lines = [f"{n} in {numbers.duration(self.wall_s)} ({rate} puzzles/s): {counts}{limit}"]
        if self.compile_s >= 0.05:  # a kernel first met during the job (a race member's): once per machine
            lines.append(
                f"compiling the solvers took {numbers.duration(self.compile_s)} more, not counted above"
            )
        if not self.n:  # every other line is a puzzle or an invalid record: say why there is none
            lines.append("the input holds no puzzle: its lines are all blank or # comments")
        pct = self.percentiles()
        if pct:
            lines.append("solve time: " + "  ".join(f"{k} {numbers.duration_ms(v)}" for k, v in pct.items()))
        if self.wins:
            ranked = sorted(self.wins.items(), key=lambda kv: -kv[1])
            wins = ", ".join(f"{k} {numbers.count(v)}" for k, v in ranked)
            lines.append(f"wins: {wins}")
        if self.approx_costs:
            costs = ", ".join(f"{c}: {numbers.count(v)}" for c, v in sorted(self.approx_costs.items()))
            lines.append(f"approximate costs (cost: puzzles): {costs}")
        if self.problems_total:
            lines.append(f"{numbers.plural(self.problems_total, 'invalid or failed line')}:")
            for input_name, p in sorted(self.problems, key=lambda ip: ip[1].index)[:PROBLEMS_SHOWN]:
                lines.append(f"  {input_name}:{p.line}: {p.status}: {p.error}")
            if self.problems_total > PROBLEMS_SHOWN:
                more = numbers.count(self.problems_total - PROBLEMS_SHOWN)
                lines.append(f"  ... and {more} more (see the output's error field)")
        return "\n".join(lines)


def _ordered(counts: dict[str, int]) -> list[str]:
    return [k for k in SUMMARY_ORDER if k in counts] + sorted(k for k in counts if k not in SUMMARY_ORDER)
