"""What the pages and the API read and change: jobs, their results, workers, and single puzzles, through the
client's public API only; a job id from a request is checked against the job id pattern before any key is
named, so no request reaches a key outside the job namespace.
"""

from __future__ import annotations

import io
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

from client.args import resume_command
from client.batch import BatchClient
from client.job import Job
from client.pool import WarmPool
from client.report import plots
from client.store import JobStatus
from client.summary import Summary
from pipeline.contract.formats import FORMATS
from pipeline.contract.tasks import DEFAULT_PRIORITY, JOB_ID_PATTERN
from pipeline.engine.inputs import TooLarge, read_upload
from pipeline.engine.render import rows
from web.errors import ApiError
from web.retention import Retention, release_memory
from web.settings import ServeSettings
from web.solving import Solver

JOB_ID = re.compile(JOB_ID_PATTERN)
IDS_FRESH_S = 2.0  # the broker's job list is scanned at most this often, however many pages poll it
MAX_NAME_CHARS = 200
ROW_STATUS = {  # the fields of a job's `JobStatus` its row shows as they are
    *("submission", "checkpoint", "producer_silent_s", "total", "submitted", "done", "counts"),
    *("rate", "eta_s", "elapsed_s", "chunks_sent", "chunks_done", "cpu_seconds", "chunk_seconds"),
}


def check_job_id(job: str) -> str:
    """The id itself when it is a job id (hex, 8 to 64 digits); ApiError 404 otherwise."""
    if not JOB_ID.fullmatch(job):
        raise ApiError(404, f"no job {job[:80]!r}: job ids are 8 to 64 hex digits")
    return job


class Backend:
    """The server's one BatchClient and puzzle processes, and the views built from them."""

    def __init__(self, client: BatchClient, pool: WarmPool, settings: ServeSettings) -> None:
        self.client = client
        self.pool = pool
        self.settings = settings
        self.embedded = client.embedded  # jobs run in this server's local processes (no broker)
        self.solver = Solver(client, pool, settings)
        self._jobs: dict[str, Job] = {}  # submitted here (embedded: every job there is)
        self._lock = threading.Lock()
        self._ids: tuple[float, list[str]] = (0.0, [])
        # embedded jobs live in this process: at most so many, within so much memory (`web.retention`)
        bounds = Retention(settings.max_jobs_kept, settings.max_memory_mb)
        self.retention = bounds if client.embedded else None

    def job_ids(self) -> list[str]:
        """Ids of the jobs in the store (embedded: those submitted here), rescanned every IDS_FRESH_S."""
        with self._lock:
            at, ids = self._ids
            if time.monotonic() - at > IDS_FRESH_S:
                ids = self.client.store.job_ids(self.settings.max_jobs_listed)
                self._ids = (time.monotonic(), ids)
            return list(ids)

    def list_jobs(self) -> list[dict[str, Any]]:
        """Every job's row for the jobs page, newest first (a job purged meanwhile is left out);
        embedded, the oldest finished jobs beyond the server's bounds are dropped first."""
        rows = []
        for job in self.job_ids():
            meta = self.client.store.meta(job)
            if "created" in meta:
                rows.append(_row(self.client.store.status(job), meta, self.embedded))
        return self._bound(sorted(rows, key=lambda r: -r["created"]))

    def _bound(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Drop the oldest finished jobs while the kept ones pass a bound; the rows left."""
        if self.retention is None:
            return rows
        while (chosen := self.retention.over(rows)) is not None:
            row, why = chosen
            self._drop(row["job"])
            self.retention.note(row, why)
            rows = [r for r in rows if r is not row]
        return rows

    def _drop(self, job: str) -> None:
        """Delete a finished job and hand the memory it held back to the system."""
        with self._lock:
            self._jobs.pop(job, None)
            self._ids = (0.0, [])
        self.client.job(job).purge()
        release_memory()

    def limits(self) -> dict[str, Any]:
        """What the server keeps (embedded: its bounds, what it keeps now, what went); {} with a broker."""
        if self.retention is None:
            return {}
        return self.retention.state(len(self.list_jobs()))

    def _meta(self, job: str) -> dict[str, str]:
        """The metadata of the job a request names; ApiError 404 (410: dropped by a bound) when none."""
        meta = self.client.store.meta(check_job_id(job))
        if "created" not in meta:
            raise self._missing(job)
        return meta

    def job(self, job: str) -> dict[str, Any]:
        """A job's page data: its row, summary (wins, percentiles, costs, cactus), what results are stored."""
        meta = self._meta(job)  # the id checked before any key is named
        row = _row(self.client.store.status(job), meta, self.embedded)
        summary = self._summary(job)
        data = summary.as_dict()
        row["summary"] = {
            "wins": data["wins"],
            "time_ms": data["time_ms"],
            "approximate_costs": {str(k): v for k, v in data["approximate_costs"].items()},
            "done_within": summary.done_within(),
            "problems": [
                {"input": name, "line": p.line, "status": p.status, "error": p.error}
                for name, p in sorted(summary.problems, key=lambda ip: ip[1].index)[:100]
            ],
            "problems_total": summary.problems_total,
        }
        row["results"] = self._availability(job, row)
        return row

    def _missing(self, job: str) -> ApiError:
        """Why a job is not here: dropped by the server's bound (410, said so), or unknown (404)."""
        gone = self.retention.was_dropped(job) if self.retention is not None else None
        if self.retention is None or gone is None:
            return ApiError(404, f"no job {job} (never created, purged, or expired)")
        when = time.strftime("%H:%M:%S", time.localtime(gone.at))
        return ApiError(
            410,
            f"job {job} ({gone.name}) was dropped at {when}: this server keeps at most "
            f"{self.retention.bound(gone.why)} (--max-jobs-kept, --max-memory-mb), oldest finished first",
        )

    def _summary(self, job: str) -> Summary:
        summary = Summary()
        for stats in self.client.store.stats(job):
            summary.add(stats, "")
        return summary

    def plots(self, job: str) -> dict[str, str]:
        """The job's plots as inline SVG, by title (labels escaped by `client.svg_chart`)."""
        self._meta(job)
        return plots(self._summary(job))

    def _answered(self, job: str) -> list[int]:
        """Chunk ids answered so far, each once, in arrival order."""
        ids, _ = self.client.store.arrivals(job, 0)
        return list(dict.fromkeys(ids))

    def _availability(self, job: str, row: dict[str, Any]) -> dict[str, Any]:
        """How much of the job's results can still be downloaded, and why not the rest."""
        if row["kind"] != "solve":
            note = "a generate run writes its own output"
            return {"answered": 0, "stored": 0, "state": "none", "note": note}
        answered = self._answered(job)
        stored = sum(self.client.store.stored(job, answered))
        if not answered:
            state, note = "pending", "no results yet"
        elif stored == len(answered):
            state = "all" if row["phase"] == "done" else "so far"
            note = "every result is stored" if state == "all" else "the results so far are stored"
        elif stored == 0:
            state = "gone"
            note = "the results were collected and are no longer stored (`solve` deletes them as it writes "
            note += "them; `collect` keeps them an hour)"
        else:
            state = "some"
            note = f"{len(answered) - stored} of {len(answered)} chunks' results were collected and are gone"
        return {"answered": len(answered), "stored": stored, "state": state, "note": note}

    def records(self, job: str, fmt: str) -> Iterator[bytes]:
        """The job's stored records, chunk by chunk in arrival order, as JSON Lines or CSV; reading does not
        collect (a `collect` later finds them). ApiError 404 for no such job, 410 when none is stored."""
        meta = self._meta(job)
        if meta.get("kind", "solve") != "solve":
            raise ApiError(404, f"job {job} is a generate run: it has no records")
        if meta.get("dataset"):  # its workers wrote the records as part files
            raise ApiError(404, f"job {job} writes a dataset to {meta['dataset']}/: read its records there")
        answered = self._answered(job)
        present = [c for c, ok in zip(answered, self.client.store.stored(job, answered), strict=True) if ok]
        if answered and not present:
            raise ApiError(410, f"job {job}: its results were collected and are no longer stored")
        return self._stream(job, present, fmt)

    def _stream(self, job: str, chunks: list[int], fmt: str) -> Iterator[bytes]:
        header = FORMATS[fmt].header
        if header:
            yield header
        for chunk in chunks:
            (result,) = self.client.store.fetch_results(job, [chunk])
            body = b"".join(rows(result, 0, len(result), fmt)) if result is not None else b""
            if body:  # (a part expired since: the rest is still worth having)
                yield body

    def submit(
        self,
        name: str,
        data: bytes,
        time_limit: float | None,
        portfolio: str | None,
        box: str | None,
        priority: str = DEFAULT_PRIORITY,
    ) -> str:
        """Start a job over an uploaded corpus (plain or gzip) at class `priority` on the broker; its id.
        ApiError 4xx for bad options."""
        most = self.settings.max_upload_bytes
        try:  # the command line's reader: every member of a multi-member gzip
            text = read_upload(data, most)
        except TooLarge:
            why = f"the upload unpacks to more than {most:,} bytes, the most this server takes"
            raise ApiError(413, why) from None
        except ValueError as exc:
            raise ApiError(422, f"the upload is {exc}") from None
        if not text.strip():
            raise ApiError(422, "the upload holds no puzzle")
        name = (name or "upload")[:MAX_NAME_CHARS]
        limit = self.settings.default_time_limit if time_limit is None else time_limit
        try:
            job = self.client.submit_inputs(
                [(name, io.BytesIO(text))],
                time_limit=limit,
                portfolio=portfolio,
                box=box,
                priority=priority,
                bounded=self.embedded,  # a broker job: sent whole (no one collects)
            )
        except ValueError as exc:
            raise ApiError(422, str(exc)) from None
        with self._lock:
            self._jobs[job.id] = job
            self._ids = (0.0, [])  # list it at once
        if self.retention is not None:
            self.list_jobs()  # room for it: the oldest finished jobs past a bound go now
        return job.id

    def purge(self, job: str) -> int:
        """Stop a job (workers solving it stop) and delete it; the number of keys or entries removed."""
        check_job_id(job)
        with self._lock:
            mine = self._jobs.pop(job, None)
            self._ids = (0.0, [])
        if mine is not None:
            mine.cancel(wait=2.0)  # stop reading its input first
        removed = self.client.job(job).purge()
        release_memory()  # else the freed results stay in the heap: the server's size would not fall
        if not removed and mine is None:
            raise ApiError(404, f"no job {job} (never created, purged, or expired)")
        return removed

    def workers(self) -> dict[str, Any]:
        """Live worker processes and what each is solving (embedded: this server's own processes)."""
        if self.embedded:
            busy = [r["job"] for r in self.list_jobs() if r["phase"] in ("submitting", "solving")]
            procs = [{"name": f"local:{p}", "role": "jobs", "solving": busy} for p in self.client.pool.pids()]
            procs += [{"name": f"local:{p}", "role": "puzzles", "solving": []} for p in self.pool.pids()]
            return {"mode": "embedded", "workers": procs, "queued": None}
        from client.redis_store import RedisJobStore

        store = self.client.store
        assert isinstance(store, RedisJobStore)
        now = time.time()
        current = store.current()
        out = []
        for name, beat in sorted(store.worker_beats().items()):
            job, _, chunk = current.get(name, "").partition(":")
            at = int(chunk) if chunk.isdigit() else None
            out.append({"name": name, "beat_s": round(now - beat, 1), "job": job or None, "chunk": at})
        return {"mode": "broker", "workers": out, "queued": store.queued()}

    def close(self) -> None:
        """Stop every job this server reads, its processes and connections."""
        with self._lock:
            jobs, self._jobs = list(self._jobs.values()), {}
        for job in jobs:
            if job.producing:
                job.cancel(fail=self.embedded, wait=1.0)
        self.client.kill()
        self.pool.kill()
        self.client.close()


def _row(status: JobStatus, meta: dict[str, str], embedded: bool) -> dict[str, Any]:
    """A job's summary row: what the jobs list shows. A submission whose producer died or failed
    is `stopped` (as `status` says it), with the command that resumes it when one can (a broker's)."""
    kind = meta.get("kind", "solve")
    stopped = status.submission == "stopped"
    return {
        "job": status.job,
        "kind": kind,
        "name": ", ".join(status.inputs) or kind,
        "created": float(meta.get("created") or 0.0),
        "options": {k: meta[k] for k in ("time_limit", "portfolio", "box") if meta.get(k)},
        "phase": "stopped"
        if stopped and status.phase == "submitting"
        else phase_shown(status.phase, status.done, meta),
        "resume": resume_command(status.job, status.inputs) if stopped and not embedded else None,
        "error": status.error or None,
        **status.model_dump(include=ROW_STATUS),
    }


def phase_shown(phase: str, done: int, meta: dict[str, str]) -> str:
    """A job's phase as the page (and `/metrics`) shows it: a generate run's is `generating` or `done`."""
    if meta.get("kind") == "generate":
        total = int(meta.get("total") or 0)
        return "done" if total and done >= total else "generating"
    return phase
