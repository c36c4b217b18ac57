// One job's page: numbers every second while it runs, plots every few seconds, downloads, purge.
"use strict";

const root = document.getElementById("job");
const JOB = root.dataset.job;
const RUNNING = ["submitting", "solving", "generating", "unknown"];
let plotsAt = 0;
let finished = false;

function table(id, entries) {
  fill(document.getElementById(id), entries.length ? entries.map(([k, v]) => row([cell(k), cell(v)])) : [row([cell("none yet")])]);
}

function show(job) {
  const phase = document.getElementById("phase");
  phase.textContent = job.phase;
  phase.className = "phase " + job.phase;
  const bar = document.getElementById("progress");
  bar.max = job.total || job.submitted || 1;
  bar.value = job.done;
  document.getElementById("progress-text").textContent = progressText(job) + " puzzles";
  document.getElementById("rate").textContent = rate(job.rate) + " puzzles/s";
  document.getElementById("eta").textContent = job.phase === "done" ? "-" : duration(job.eta_s);
  document.getElementById("elapsed").textContent = duration(job.elapsed_s);
  document.getElementById("chunks").textContent = count(job.chunks_done) + " / " + count(job.chunks_sent) + " done";
  document.getElementById("cost").textContent = sig(job.cpu_seconds) + " CPU s, " + sig(job.chunk_seconds) + " s of chunks";
  document.getElementById("error").textContent = job.error || "-";
  const resume = document.getElementById("resume");
  resume.hidden = job.phase !== "stopped";
  resume.textContent = job.phase === "stopped" ? resumeText(job) : "";
  table("counts", Object.entries(job.counts).map(([k, v]) => [k, count(v)]));
  table("wins", Object.entries(job.summary.wins).map(([k, v]) => [k, count(v)]));
  table("times", Object.entries(job.summary.time_ms).map(([k, v]) => [k, durationMs(v)]));
  document.getElementById("results-note").textContent = job.results.note;
  document.getElementById("downloads").hidden = job.results.stored === 0;
  document.getElementById("problems-total").textContent = count(job.summary.problems_total);
  document.getElementById("problems-section").hidden = !job.summary.problems_total;
  fill(document.getElementById("problems"), job.summary.problems.map((p) => row([cell(count(p.line)), cell(p.status), cell(p.error)])));
}

async function refreshPlots() {
  const response = await fetch("/jobs/" + JOB + "/plots", { credentials: "same-origin" });
  if (response.ok) {
    // server-rendered and escaped SVG (client/svg_chart.py); no script runs from it (CSP)
    document.getElementById("plots").innerHTML = await response.text();
  }
}

async function refresh() {
  try {
    const job = await api("/api/jobs/" + JOB);
    show(job);
    const running = RUNNING.includes(job.phase);
    if (Date.now() - plotsAt > (running ? 3000 : 0) || (!running && !finished)) {
      plotsAt = Date.now();
      await refreshPlots();
    }
    finished = !running;
  } catch (e) {
    document.getElementById("error").textContent = e.message;
    finished = true;
  }
  setTimeout(refresh, finished ? 10000 : 1000);
}

document.getElementById("purge").addEventListener("click", async () => {
  if (!window.confirm("Purge job " + JOB + "? Its results are deleted; workers solving it stop.")) return;
  try {
    const done = await api("/api/jobs/" + JOB, { method: "DELETE" });
    document.getElementById("purge-message").textContent = "purged (" + count(done.removed) + " keys removed)";
    window.location.href = "/jobs";
  } catch (e) {
    document.getElementById("purge-message").textContent = e.message;
  }
});

refresh();
