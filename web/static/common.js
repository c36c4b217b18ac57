// Helpers shared by the pages: JSON requests, table rows built from text nodes only, numbers.
"use strict";

async function api(path, options) {
  const response = await fetch(path, Object.assign({ credentials: "same-origin" }, options || {}));
  let body = null;
  try {
    body = await response.json();
  } catch (e) {
    body = { error: "the server answered " + response.status + " without JSON" };
  }
  if (!response.ok) {
    throw new Error((body && body.error) || "error " + response.status);
  }
  return body;
}

function cell(text, className) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "-" : String(text);
  if (className) td.className = className;
  return td;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) tr.appendChild(c instanceof Node ? c : cell(c));
  return tr;
}

function link(href, text) {
  const a = document.createElement("a");
  a.href = href;
  a.textContent = text;
  return a;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

// Numbers as client/numbers.py writes them (the summary and the HTML report): counts with
// separators, measured values to 3 significant digits in the unit that fits; half way rounds away
// from zero (toPrecision's way, which numbers.py follows); not finite reads "-". tests/test_numbers.py
// compares these with numbers.py over one table of values.
function whole(value) {
  const r = Math.sign(value) * Math.round(Math.abs(value));
  return (r || 0).toLocaleString("en"); // never "-0"
}

function count(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "-";
  return whole(value);
}

function sig(value, digits) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "-";
  digits = digits || 3;
  const rounded = Number(value.toPrecision(digits));
  if (rounded === 0) return "0";
  if (Math.abs(rounded) >= 100) return whole(value);
  const text = rounded.toFixed(Math.max(0, digits - 1 - Math.floor(Math.log10(Math.abs(rounded)))));
  return text.includes(".") ? text.replace(/0+$/, "").replace(/\.$/, "") : text;
}

function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds) || seconds < 0) return "-";
  if (seconds === 0) return "0 s";
  if (seconds < 0.9995e-3) return sig(seconds * 1e6) + " us"; // what would read 1,000 us is 1 ms
  if (seconds < 0.9995) return sig(seconds * 1e3) + " ms";
  if (seconds < 59.95) return sig(seconds) + " s";
  if (seconds < 3599.5) {
    const secs = Math.round(seconds);
    const rest = secs % 60;
    return (secs - rest) / 60 + " min" + (rest ? " " + rest + " s" : "");
  }
  const minutes = Math.round(seconds / 60);
  const rest = minutes % 60;
  return ((minutes - rest) / 60).toLocaleString("en") + " h" + (rest ? " " + rest + " min" : "");
}

function durationMs(ms) {
  return ms === null || ms === undefined ? "-" : duration(ms / 1e3);
}

function rate(value) {
  if (value === null || value === undefined || value === 0) return "0";
  if (!Number.isFinite(value)) return "-";
  return value >= 10 ? whole(value) : sig(value, 2);
}

function counts(map) {
  const parts = Object.entries(map || {}).map(([k, v]) => k + " " + count(v));
  return parts.length ? parts.join(", ") : "none yet";
}

// A count with its noun, singular for exactly one, as client/numbers.py `plural` writes it.
function plural(value, noun, nouns) {
  return count(value) + " " + (value === 1 ? noun : nouns || noun + "s");
}

function progressCell(job) {
  const td = document.createElement("td");
  const bar = document.createElement("progress");
  bar.max = job.total || job.submitted || 1;
  bar.value = job.done;
  td.appendChild(bar);
  td.appendChild(document.createTextNode(" " + progressText(job)));
  return td;
}

function progressText(job) {
  // "N+" while the input is read; a submission whose producer stopped says so (the bar is full of
  // what was read, not of the input)
  const total = job.total !== null && job.total !== undefined ? count(job.total) : count(job.submitted) + "+";
  return count(job.done) + " / " + total + (job.phase === "stopped" ? " (submission stopped)" : "");
}

function resumeText(job) {
  const silent = job.producer_silent_s ? ", its producer silent for " + duration(job.producer_silent_s) : "";
  const how = job.resume ? "; resume it: " + job.resume : "";
  return "The submission stopped after " + count(job.checkpoint) + " puzzles" + silent + how;
}
