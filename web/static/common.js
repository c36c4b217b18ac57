// Helpers shared by the jobs pages: JSON requests and table rows built from text nodes only.
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

function rate(value) {
  if (!value) return "0";
  return value >= 10 ? Math.round(value).toLocaleString("en") : value.toPrecision(2);
}

function seconds(value) {
  if (value === null || value === undefined) return "-";
  if (value < 60) return value.toFixed(value < 10 ? 1 : 0) + " s";
  if (value < 3600) return Math.floor(value / 60) + " min " + Math.round(value % 60) + " s";
  return Math.floor(value / 3600) + " h " + Math.round((value % 3600) / 60) + " min";
}

function counts(map) {
  const parts = Object.entries(map || {}).map(([k, v]) => k + " " + v.toLocaleString("en"));
  return parts.length ? parts.join(", ") : "none yet";
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
  const total = job.total !== null && job.total !== undefined ? job.total : job.submitted + "+";
  return job.done.toLocaleString("en") + " / " + total.toLocaleString("en");
}
