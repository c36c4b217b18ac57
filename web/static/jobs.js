// The jobs page: the list of jobs and the workers, polled every 2 s; a corpus upload.
"use strict";

const POLL_MS = 2000;

async function refreshJobs() {
  const body = document.getElementById("jobs");
  try {
    const jobs = await api("/api/jobs");
    if (!jobs.length) {
      fill(body, [row([cell("no jobs yet: submit a corpus above, or with `sudoku-batch submit`")])]);
      body.firstChild.firstChild.colSpan = 8;
      return;
    }
    fill(body, jobs.map((job) => {
      const tr = row([
        (() => { const td = cell(""); td.replaceChildren(link("/jobs/" + job.job, job.job.slice(0, 8))); return td; })(),
        cell(job.name),
        (() => { const td = cell(job.phase, "phase " + job.phase); if (job.phase === "stopped") td.title = resumeText(job); return td; })(),
        progressCell(job),
        cell(rate(job.rate)),
        cell(job.phase === "done" ? "-" : duration(job.eta_s)),
        cell(counts(job.counts)),
        cell(new Date(job.created * 1000).toLocaleString()),
      ]);
      tr.dataset.job = job.job;
      return tr;
    }));
  } catch (e) {
    fill(body, [row([cell("cannot list the jobs: " + e.message)])]);
  }
}

async function refreshWorkers() {
  const body = document.getElementById("workers");
  const note = document.getElementById("workers-note");
  try {
    const data = await api("/api/workers");
    if (data.mode === "embedded") {
      note.textContent = "Embedded: this server's own processes (jobs, and single puzzles).";
    } else {
      const live = plural(data.workers.length, "live worker process", "live worker processes");
      note.textContent = live + "; " + plural(data.queued, "chunk message") + " waiting in the queue.";
    }
    fill(body, data.workers.map((w) => {
      const jobs = data.mode === "embedded" ? w.solving : w.job ? [w.job] : [];
      const solving = cell(jobs.length ? "" : "idle");
      jobs.forEach((job, k) => {
        if (k) solving.appendChild(document.createTextNode(", "));
        solving.appendChild(link("/jobs/" + job, "job " + job.slice(0, 8)));
      });
      if (data.mode !== "embedded" && w.job && w.chunk !== null && w.chunk !== undefined) {
        solving.appendChild(document.createTextNode(", chunk " + count(w.chunk)));
      }
      const name = data.mode === "embedded" ? w.name + " (" + (w.role === "jobs" ? "jobs" : "single puzzles") + ")" : w.name;
      return row([cell(name), cell(w.beat_s === undefined ? "-" : duration(w.beat_s) + " ago"), solving]);
    }));
  } catch (e) {
    note.textContent = "cannot list the workers: " + e.message;
  }
}

async function refreshLimits() {
  // embedded: jobs live in this server's memory, within its bounds; say them, and what went
  const note = document.getElementById("limits-note");
  try {
    const kept = await api("/api/limits");
    if (kept.max_jobs_kept === undefined) return;
    let text = "This server keeps at most " + count(kept.max_jobs_kept) + " jobs and " + count(kept.max_memory_mb) +
      " MB of memory (now " + count(kept.jobs_kept) + (kept.jobs_kept === 1 ? " job" : " jobs") + (kept.memory_mb === null ? "" : ", " + count(kept.memory_mb) + " MB") +
      "); past either the oldest finished jobs are dropped.";
    if (kept.dropped_total) {
      const last = kept.dropped[0];
      const why = last.why === "jobs" ? "past the job count" : "past the memory bound";
      text += " Dropped so far: " + count(kept.dropped_total) + " (the last: " + last.job.slice(0, 8) + " " + last.name +
        ", " + why + ", at " + new Date(last.at * 1000).toLocaleTimeString() + ").";
    }
    note.textContent = text;
    note.hidden = false;
  } catch (e) {
    note.textContent = "cannot read the server's bounds: " + e.message;
    note.hidden = false;
  }
}

async function upload(event) {
  event.preventDefault();
  const message = document.getElementById("upload-message");
  const file = document.getElementById("file").files[0];
  if (!file) return;
  const params = new URLSearchParams({ name: file.name });
  const fields = [["time-limit", "time_limit"], ["portfolio", "portfolio"], ["box", "box"], ["priority", "priority"]];
  for (const [id, key] of fields) {
    const field = document.getElementById(id);  // the priority: a broker's page only
    const value = field ? field.value.trim() : "";
    if (value) params.set(key, value);
  }
  message.textContent = "uploading " + file.name + "...";
  try {
    const made = await api("/api/jobs?" + params.toString(), {
      method: "POST",
      headers: { "content-type": "application/octet-stream" },
      body: file,
    });
    window.location.href = made.url;
  } catch (e) {
    message.textContent = e.message;
  }
}

document.getElementById("upload").addEventListener("submit", upload);
refreshJobs().then(refreshLimits);
refreshWorkers();
setInterval(() => refreshJobs().then(refreshLimits), POLL_MS);
setInterval(refreshWorkers, POLL_MS);
