// The one-puzzle page: a grid editor (keys, paste), samples, random puzzles, and the answer drawn on the grid.
"use strict";

const ALPHABET = "123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const EMPTY = ".0_-";
const state = { rows: 3, cols: 3, n: 9, givens: new Array(81).fill(0), cells: [], last: null, seed: 0 };
const $ = (id) => document.getElementById(id);

function say(text, kind) {
  const m = $("message");
  m.textContent = text;
  m.className = kind || "";
}

function boxOf(text) {
  const m = /^(\d+)x(\d+)$/.exec(text);
  return m ? { rows: +m[1], cols: +m[2] } : null;
}

function build(rows, cols, givens) {
  state.rows = rows;
  state.cols = cols;
  state.n = rows * cols;
  state.givens = givens || new Array(state.n * state.n).fill(0);
  const grid = $("grid");
  grid.style.gridTemplateColumns = "repeat(" + state.n + ", var(--cell))";
  grid.classList.toggle("large", state.n > 12);
  state.cells = [];
  const cells = [];
  for (let i = 0; i < state.n * state.n; i++) {
    const r = Math.floor(i / state.n), c = i % state.n;
    const input = document.createElement("input");
    input.maxLength = 1;
    input.inputMode = state.n <= 9 ? "numeric" : "text";
    input.setAttribute("aria-label", "row " + (r + 1) + " column " + (c + 1));
    input.dataset.index = i;
    if ((c + 1) % cols === 0 && c + 1 < state.n) input.classList.add("box-right");
    if ((r + 1) % rows === 0 && r + 1 < state.n) input.classList.add("box-bottom");
    input.addEventListener("keydown", onKey);
    input.addEventListener("paste", onPaste);
    input.addEventListener("input", onInput);
    state.cells.push(input);
    cells.push(input);
  }
  grid.replaceChildren(...cells);
  ensureBoxOption(rows + "x" + cols);
  showGivens();
}

function ensureBoxOption(text) {
  const select = $("box");
  if (![...select.options].some((o) => o.value === text)) {
    const option = document.createElement("option");
    option.value = text;
    const box = boxOf(text);
    option.textContent = text + " (" + box.rows * box.cols + "x" + box.rows * box.cols + " grid)";
    select.appendChild(option);
  }
  select.value = text;
}

function symbol(v) {
  return v ? ALPHABET[v - 1] : "";
}

function showGivens() {
  state.cells.forEach((input, i) => {
    input.value = symbol(state.givens[i]);
    input.readOnly = false;
    input.className = input.className.replace(/\b(given|solved|conflict)\b/g, "").trim();
    if (state.givens[i]) input.classList.add("given");
  });
  $("answer").hidden = true;
  $("again").disabled = true;
}

function valueOf(ch) {
  if (EMPTY.includes(ch) || ch === " ") return 0;
  const v = ALPHABET.indexOf(ch.toUpperCase()) + 1;
  return v >= 1 && v <= state.n ? v : -1;
}

function move(i, delta) {
  const j = i + delta;
  if (j >= 0 && j < state.cells.length) state.cells[j].focus();
}

function setCell(i, v) {
  if (state.last) showGivens(); // editing after an answer: back to the puzzle
  state.last = null;
  state.givens[i] = v;
  const input = state.cells[i];
  input.value = symbol(v);
  input.classList.toggle("given", v > 0);
}

function onKey(event) {
  const i = +event.target.dataset.index;
  const n = state.n;
  const moves = { ArrowLeft: -1, ArrowRight: 1, ArrowUp: -n, ArrowDown: n };
  if (event.key in moves) {
    event.preventDefault();
    move(i, moves[event.key]);
  } else if (event.key === "Backspace" || event.key === "Delete") {
    event.preventDefault();
    setCell(i, 0);
    if (event.key === "Backspace") move(i, -1);
  } else if (event.key.length === 1 && !event.ctrlKey && !event.metaKey) {
    event.preventDefault();
    const v = valueOf(event.key);
    if (v < 0) {
      say("'" + event.key + "' is no value of a " + n + "x" + n + " grid (1-" + symbol(n) + ")", "error");
      return;
    }
    say("");
    setCell(i, v);
    move(i, 1);
  }
}

function onInput(event) { // a virtual keyboard that sends no keydown: take the last character typed
  const i = +event.target.dataset.index;
  const ch = event.target.value.slice(-1);
  const v = ch ? valueOf(ch) : 0;
  setCell(i, v < 0 ? 0 : v);
}

function onPaste(event) {
  const text = (event.clipboardData || window.clipboardData).getData("text");
  if (text.trim().length > 1) {
    event.preventDefault();
    loadLine(text, null);
  }
}

function tokens(text) {
  const t = text.trim();
  if (/[\s,;]/.test(t.replace(/\n/g, " ")) && /\d\s*[\s,;]\s*\d/.test(t)) {
    return t.split(/[\s,;]+/).filter((s) => s.length).map((s) => (s === "." ? 0 : parseInt(s, 10)));
  }
  return [...t.replace(/\s+/g, "")].map((ch) => valueOf36(ch));
}

function valueOf36(ch) {
  if (EMPTY.includes(ch)) return 0;
  const v = ALPHABET.indexOf(ch.toUpperCase()) + 1;
  return v >= 1 ? v : NaN;
}

function inferBox(side, preferred) {
  if (preferred && preferred.rows * preferred.cols === side) return preferred;
  const root = Math.floor(Math.sqrt(side));
  let rows = 1;
  for (let d = 1; d <= root; d++) if (side % d === 0) rows = d;
  return rows > 1 ? { rows: rows, cols: side / rows } : null;
}

function loadLine(text, boxText) {
  const values = tokens(text);
  const side = Math.round(Math.sqrt(values.length));
  if (side * side !== values.length || side < 4 || side > 35) {
    say(values.length + " cells do not make a square grid from 4x4 to 35x35", "error");
    return false;
  }
  const bad = values.findIndex((v) => Number.isNaN(v) || v < 0 || v > side);
  if (bad >= 0) {
    say("cell " + (bad + 1) + " holds no value of a " + side + "x" + side + " grid", "error");
    return false;
  }
  const box = inferBox(side, boxText ? boxOf(boxText) : boxOf($("box").value));
  if (!box) {
    say("a " + side + "x" + side + " grid has no box of its own: choose one", "error");
    return false;
  }
  state.last = null;
  build(box.rows, box.cols, values);
  say("loaded a " + side + "x" + side + " puzzle with " + values.filter((v) => v).length + " givens");
  return true;
}

function puzzleLine() {
  return state.givens.map((v) => (v ? ALPHABET[v - 1] : ".")).join("");
}

function conflicts(values) {
  // cells whose value repeats in a row, column or box, and givens the grid changed
  const n = state.n, out = new Set();
  const units = [];
  for (let k = 0; k < n; k++) {
    const row = [], col = [], box = [];
    const br = Math.floor(k / (n / state.cols)) * state.rows, bc = (k % (n / state.cols)) * state.cols;
    for (let j = 0; j < n; j++) {
      row.push(k * n + j);
      col.push(j * n + k);
      box.push((br + Math.floor(j / state.cols)) * n + bc + (j % state.cols));
    }
    units.push(row, col, box);
  }
  for (const unit of units) {
    const seen = new Map();
    for (const i of unit) {
      if (!values[i]) continue;
      if (!seen.has(values[i])) seen.set(values[i], []);
      seen.get(values[i]).push(i);
    }
    for (const cells of seen.values()) if (cells.length > 1) cells.forEach((i) => out.add(i));
  }
  state.givens.forEach((g, i) => { if (g && values[i] !== g) out.add(i); });
  return out;
}

function ms(value) {
  return (value < 100 ? value.toPrecision(3) : Math.round(value).toLocaleString("en")) + " ms";
}

function showAnswer(record, seed) {
  $("answer").hidden = false;
  $("a-status").textContent = record.status;
  $("a-status").className = "status " + record.status;
  $("a-cost").textContent = record.cost === null ? "-" : record.cost;
  $("a-solver").textContent = record.solver || "-";
  $("a-time").textContent = record.time_ms === null ? "-" : ms(record.time_ms);
  $("a-nodes").textContent = record.nodes.toLocaleString("en");
  $("a-guesses").textContent = record.guesses.toLocaleString("en");
  $("a-restarts").textContent = record.restarts;
  $("a-seed").textContent = seed;
  $("a-error").textContent = record.error || "-";
  const rows = [];
  for (const [solver, counters] of Object.entries(record.counters || {})) {
    for (const [name, value] of Object.entries(counters)) {
      const tr = document.createElement("tr");
      for (const text of [solver, name, typeof value === "number" ? value.toLocaleString("en") : JSON.stringify(value)]) {
        const td = document.createElement("td");
        td.textContent = text;
        tr.appendChild(td);
      }
      rows.push(tr);
    }
  }
  $("a-counters").replaceChildren(...rows);
  if (!record.solution) return;
  const values = tokens(record.solution);
  if (values.length !== state.cells.length) return;
  const bad = record.status === "approximate" ? conflicts(values) : new Set();
  state.cells.forEach((input, i) => {
    input.value = symbol(values[i]);
    input.classList.toggle("given", state.givens[i] > 0);
    input.classList.toggle("solved", !state.givens[i]);
    input.classList.toggle("conflict", bad.has(i));
  });
}

async function solve(seed) {
  if (!state.givens.some((v) => v)) {
    say("the grid is empty: type givens, paste a line, or pick a sample", "error");
    return;
  }
  const request = {
    puzzle: puzzleLine(),
    box: state.rows + "x" + state.cols,
    time_limit: parseFloat($("time-limit").value),
    portfolio: $("portfolio").value,
    seed: seed,
  };
  if (!(request.time_limit > 0)) delete request.time_limit;
  say("solving (at most " + (request.time_limit || "the default") + " s)...", "busy");
  $("solve").disabled = $("again").disabled = true;
  try {
    const response = await fetch("/api/solve", {
      method: "POST",
      credentials: "same-origin",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(request),
    });
    const body = await response.json();
    if (!response.ok) {
      say(body.error || "error " + response.status, "error");
      return;
    }
    state.last = request;
    showAnswer(body, seed);
    const words = { solved: "solved", approximate: "no solution in time: the best grid found, cost " + body.cost,
      unsolvable: "this puzzle has no solution", timeout: "no answer within the time limit" };
    say(words[body.status] || body.status + (body.error ? ": " + body.error : ""), body.status);
    $("again").disabled = false;
  } catch (e) {
    say("the server did not answer: " + e.message, "error");
  } finally {
    $("solve").disabled = false;
  }
}

async function randomPuzzle() {
  const params = new URLSearchParams({ box: $("box").value });
  if ($("level").value) params.set("level", $("level").value);
  say("making a random puzzle...", "busy");
  try {
    const response = await fetch("/api/random?" + params.toString(), { credentials: "same-origin" });
    const body = await response.json();
    if (!response.ok) {
      say(body.error || "error " + response.status, "error");
      return;
    }
    loadLine(body.puzzle, body.box);
    say("random " + body.level + " puzzle, " + body.clues + " givens (seed " + body.seed + ")");
  } catch (e) {
    say("the server did not answer: " + e.message, "error");
  }
}

$("controls").addEventListener("submit", (event) => {
  event.preventDefault();
  state.seed = 0;
  solve(0);
});
$("again").addEventListener("click", () => {
  state.seed = Math.floor(Math.random() * 2 ** 31) + 1;
  solve(state.seed);
});
$("random").addEventListener("click", randomPuzzle);
$("load").addEventListener("click", () => loadLine($("line").value, null));
$("line").addEventListener("keydown", (event) => {
  if (event.key === "Enter") {
    event.preventDefault();
    loadLine($("line").value, null);
  }
});
$("clear").addEventListener("click", () => { state.last = null; build(state.rows, state.cols, null); say(""); });
$("box").addEventListener("change", () => {
  const box = boxOf($("box").value);
  state.last = null;
  build(box.rows, box.cols, null);
});
$("sample").addEventListener("change", () => {
  const option = $("sample").selectedOptions[0];
  if (option && option.value !== "") loadLine(option.dataset.puzzle, option.dataset.box);
});
build(3, 3, null);
