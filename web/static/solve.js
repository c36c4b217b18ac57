// The one-puzzle page: a grid editor (keys, paste), samples, random puzzles, and the answer drawn on the grid.
"use strict";

const LETTERS = "123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"; // values 1-35, one symbol each (any case)
const SYMBOLS = LETTERS + "abcdefghijklmnopqrstuvwxyz"; // a compact line of a 36x36 to 61x61 grid (case counts)
const EMPTY = ".0_-";
const MAX_SIDE = 64;
const MAX_SHOWN = 16; // solutions "New solution" avoids (the server takes as many)
const state = { rows: 3, cols: 3, n: 9, givens: new Array(81).fill(0), cells: [], answered: false, shown: [], typed: null };
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

function cellPx(n) {
  // every grid fits a 1280-pixel window: 9x9 at 36 px a cell, 64x64 at 18
  if (n <= 9) return 36;
  if (n <= 12) return 32;
  if (n <= 16) return 28;
  if (n <= 25) return 24;
  if (n <= 36) return 22;
  return n <= 49 ? 20 : 18;
}

function build(rows, cols, givens) {
  state.rows = rows;
  state.cols = cols;
  state.n = rows * cols;
  const n = state.n;
  state.givens = givens || new Array(n * n).fill(0);
  const grid = $("grid");
  grid.style.setProperty("--n", n);
  grid.style.setProperty("--cell", cellPx(n) + "px");
  grid.parentElement.style.setProperty("--board", n * cellPx(n) + 4 + "px"); // the cells and the border
  grid.classList.toggle("wide", n > LETTERS.length);
  grid.dataset.box = rows + "x" + cols;
  state.cells = [];
  for (let i = 0; i < n * n; i++) {
    const r = Math.floor(i / n), c = i % n;
    const input = document.createElement("input");
    input.maxLength = n > LETTERS.length ? 2 : 1;
    input.inputMode = n <= 9 || n > LETTERS.length ? "numeric" : "text";
    input.setAttribute("aria-label", "row " + (r + 1) + " column " + (c + 1));
    input.dataset.index = i;
    if (c + 1 === n) input.classList.add("last-col");
    else if ((c + 1) % cols === 0) input.classList.add("box-right");
    if (r + 1 === n) input.classList.add("last-row");
    else if ((r + 1) % rows === 0) input.classList.add("box-bottom");
    input.addEventListener("keydown", onKey);
    input.addEventListener("paste", onPaste);
    input.addEventListener("input", onInput);
    state.cells.push(input);
  }
  grid.replaceChildren(...state.cells);
  ensureBoxOption(rows + "x" + cols);
  showGivens();
  say(""); // a new grid: what the message said was about the old one
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
  if (!v) return "";
  return state.n > LETTERS.length ? String(v) : LETTERS[v - 1];
}

function showGivens() {
  state.cells.forEach((input, i) => {
    input.value = symbol(state.givens[i]);
    input.classList.remove("solved", "conflict");
    input.classList.toggle("given", state.givens[i] > 0);
  });
  state.answered = false;
  $("answer").hidden = true;
  $("again").disabled = true;
}

function puzzleChanged(keepSample) {
  // every field says what the grid holds: the line, the sample only while the grid is that sample, and
  // the givens in conflict in red; returns the first conflict in the server's words ("" for none)
  state.shown = [];
  if (!keepSample) $("sample").value = "";
  $("line").value = state.givens.some((v) => v) ? puzzleLine() : "";
  const bad = conflicts(state.givens);
  state.cells.forEach((input, i) => input.classList.toggle("conflict", bad.has(i)));
  return bad.size ? clash(state.givens) : "";
}

function valueOf(ch) {
  if (EMPTY.includes(ch) || ch === " ") return 0;
  const v = LETTERS.indexOf(ch.toUpperCase()) + 1;
  return v >= 1 && v <= state.n ? v : -1;
}

function move(i, delta) {
  const j = i + delta;
  if (j >= 0 && j < state.cells.length) state.cells[j].focus();
}

function setCell(i, v) {
  if (state.answered) showGivens(); // editing after an answer: back to the puzzle
  state.givens[i] = v;
  const input = state.cells[i];
  input.value = symbol(v);
  input.classList.toggle("given", v > 0);
  const clashes = puzzleChanged(false);
  say(clashes, clashes ? "error" : "");
}

function typeDigit(i, digit) {
  // grids above 35x35 take values as numbers: digits typed in a row build one (1-64)
  const before = state.typed && state.typed.index === i ? state.typed.text : "";
  let text = before + digit;
  if (+text > state.n) text = digit;
  const v = +text;
  setCell(i, v <= state.n ? v : 0);
  if (v === 0 || v * 10 > state.n || text.length === 2) {
    state.typed = null;
    move(i, 1);
  } else {
    state.typed = { index: i, text: text };
  }
}

function onKey(event) {
  const i = +event.target.dataset.index;
  const n = state.n;
  const moves = { ArrowLeft: -1, ArrowRight: 1, ArrowUp: -n, ArrowDown: n };
  if (event.key in moves) {
    event.preventDefault();
    state.typed = null;
    move(i, moves[event.key]);
  } else if (event.key === "Backspace" || event.key === "Delete") {
    event.preventDefault();
    state.typed = null;
    setCell(i, 0);
    if (event.key === "Backspace") move(i, -1);
  } else if (event.key.length === 1 && !event.ctrlKey && !event.metaKey) {
    event.preventDefault();
    if (n > LETTERS.length && /[0-9]/.test(event.key)) {
      say("");
      typeDigit(i, event.key);
      return;
    }
    const v = n > LETTERS.length ? (EMPTY.includes(event.key) || event.key === " " ? 0 : -1) : valueOf(event.key);
    if (v < 0) {
      say("'" + event.key + "' is no value of a " + n + "x" + n + " grid (1-" + (n > LETTERS.length ? n : symbol(n)) + ")", "error");
      return;
    }
    say("");
    state.typed = null;
    setCell(i, v);
    move(i, 1);
  }
}

function onInput(event) { // a virtual keyboard that sends no keydown: take what the cell holds
  const i = +event.target.dataset.index;
  const text = event.target.value.trim();
  let v = 0;
  if (state.n > LETTERS.length) v = /^\d+$/.test(text) && +text <= state.n ? +text : 0;
  else v = text ? Math.max(0, valueOf(text.slice(-1))) : 0;
  setCell(i, v);
}

function onPaste(event) {
  const text = (event.clipboardData || window.clipboardData).getData("text");
  if (text.trim().length > 1) {
    event.preventDefault();
    loadLine(text, null);
  }
}

function tokens(text) {
  // integers with separators (any grid), or one symbol a cell: 1-9 A-Z in any case up to 35x35,
  // then a-z as 36-61 (the CLI's compact notation)
  const t = text.trim();
  if (/\d\s*[\s,;]\s*\d/.test(t)) {
    return t.split(/[\s,;]+/).filter((s) => s.length).map((s) => (EMPTY.includes(s) ? 0 : /^\d+$/.test(s) ? +s : NaN));
  }
  const chars = [...t.replace(/\s+/g, "")];
  const wide = chars.length > LETTERS.length * LETTERS.length;
  return chars.map((ch) => {
    if (EMPTY.includes(ch)) return 0;
    const v = (wide ? SYMBOLS.indexOf(ch) : LETTERS.indexOf(ch.toUpperCase())) + 1;
    return v >= 1 ? v : NaN;
  });
}

function inferBox(side, preferred) {
  if (preferred && preferred.rows * preferred.cols === side) return preferred;
  const root = Math.floor(Math.sqrt(side));
  let rows = 1;
  for (let d = 1; d <= root; d++) if (side % d === 0) rows = d;
  return rows > 1 ? { rows: rows, cols: side / rows } : null;
}

function loadLine(text, boxText, keepSample) {
  const values = tokens(text);
  const side = Math.round(Math.sqrt(values.length));
  if (side * side !== values.length || side < 4 || side > MAX_SIDE) {
    say(values.length + " cells do not make a square grid from 4x4 to " + MAX_SIDE + "x" + MAX_SIDE, "error");
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
  build(box.rows, box.cols, values);
  const clashes = puzzleChanged(keepSample);
  const loaded = "loaded a " + side + "x" + side + " puzzle with " + count(values.filter((v) => v).length) + " givens";
  say(clashes ? loaded + ", but " + clashes : loaded, clashes ? "error" : "");
  return true;
}

function puzzleLine() {
  if (state.n > LETTERS.length) return state.givens.join(" ");
  return state.givens.map((v) => (v ? LETTERS[v - 1] : ".")).join("");
}

function units() {
  // every row, then every column, then every box (row-major), as the server numbers them
  const n = state.n, rows = [], cols = [], boxes = [];
  for (let k = 0; k < n; k++) {
    const row = [], col = [], box = [];
    const br = Math.floor(k / (n / state.cols)) * state.rows, bc = (k % (n / state.cols)) * state.cols;
    for (let j = 0; j < n; j++) {
      row.push(k * n + j);
      col.push(j * n + k);
      box.push((br + Math.floor(j / state.cols)) * n + bc + (j % state.cols));
    }
    rows.push(row);
    cols.push(col);
    boxes.push(box);
  }
  return [...rows, ...cols, ...boxes];
}

function clash(values) {
  // the first unit holding a value twice, worded as the server words it: "row 1 has two 3s"
  const n = state.n, all = units();
  for (let u = 0; u < all.length; u++) {
    const times = new Array(n + 1).fill(0);
    for (const i of all[u]) times[values[i]]++;
    const v = times.findIndex((t, value) => value > 0 && t > 1);
    if (v > 0) {
      const many = { 2: "two", 3: "three", 4: "four" }[times[v]] || String(times[v]);
      return ["row", "column", "box"][Math.floor(u / n)] + " " + ((u % n) + 1) + " has " + many + " " + symbol(v) + "s";
    }
  }
  return "";
}

function conflicts(values) {
  // cells whose value repeats in a row, column or box, and givens the grid changed
  const out = new Set();
  for (const unit of units()) {
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

const ENDINGS = {
  solved: "solved",
  unsolvable: "proved there is no solution",
  lost: "another solver answered first",
  timeout: "time limit",
  stopped: "stopped",
  "fast path only": "fast path only (no share at this size)",
  done: "every solution enumerated",
  running: "running",
};

function work(c) {
  const some = (n, what) => count(n) + " " + what + (n === 1 ? "" : "s");
  if (c.conflicts !== undefined) return some(c.conflicts, "conflict");
  if (c.iterations !== undefined) return some(c.iterations, "iteration");
  if (c.nodes !== undefined) return some(c.nodes, "node");
  return "-";
}

function members(record) {
  // one row per solver, the one that answered first: time (and its part of the whole), planned
  // share, work, best cost, how it ended
  const entries = Object.entries(record.counters || {});
  const total = entries.reduce((sum, [, c]) => sum + (c.time_ms || 0), 0);
  entries.sort(([a, x], [b, y]) => (b === record.solver) - (a === record.solver) || (y.time_ms || 0) - (x.time_ms || 0));
  return entries.map(([name, c]) => {
    let ended = c.status !== undefined ? ENDINGS[c.status] || c.status : name === record.solver ? record.status : "-";
    if (name === record.solver && record.status === "approximate") ended = "best grid (cost " + record.cost + ")";
    const part = total > 0 && entries.length > 1 ? " (" + Math.round((100 * (c.time_ms || 0)) / total) + "%)" : "";
    const share = c.share === undefined ? "-" : sig(100 * c.share) + "%";
    const best = c.best_cost === undefined || c.best_cost === null ? "-" : count(c.best_cost);
    // the record's time_ms is written to 0.1 us, a solver's to 1 ns: where they are one measurement
    // (the solver that answered alone), the row shows the record's, so one time reads the same twice
    const same = name === record.solver && typeof record.time_ms === "number" && Math.abs((c.time_ms || 0) - record.time_ms) <= 0.000051;
    const tr = row([name, durationMs(same ? record.time_ms : c.time_ms) + part, share, work(c), best, ended]);
    if (name === record.solver) tr.className = "winner";
    return tr;
  });
}

function rawCounters(record) {
  const rows = [];
  for (const [solver, counters] of Object.entries(record.counters || {})) {
    for (const [name, value] of Object.entries(counters)) {
      const text = typeof value === "number" ? (Number.isInteger(value) ? count(value) : sig(value)) : value === null ? "-" : String(value);
      rows.push(row([solver, name, text]));
    }
  }
  return rows;
}

function showAnswer(record, seed) {
  $("answer").hidden = false;
  $("a-status").textContent = record.status;
  $("a-status").className = "status " + record.status;
  $("a-cost").textContent = record.cost === null ? "-" : count(record.cost);
  $("a-solver").textContent = record.solver || "-";
  $("a-time").textContent = durationMs(record.time_ms);
  $("a-nodes").textContent = count(record.nodes);
  $("a-guesses").textContent = count(record.guesses);
  $("a-restarts").textContent = count(record.restarts);
  $("a-seed").textContent = seed;
  $("a-error").textContent = record.error || "-";
  fill($("a-members"), members(record));
  fill($("a-counters"), rawCounters(record));
  state.answered = true;
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

function verdict(body, another) {
  if (another && body.another === false) {
    if (body.solutions === 1) return ["this puzzle has exactly one solution: it is shown", "solved"];
    if (body.solutions) return ["all " + count(body.solutions) + " solutions of this puzzle have been shown", "solved"];
    return ["no other solution found within the time limit (the one shown stays)", "timeout"];
  }
  const words = {
    solved: another ? "another solution (" + (state.shown.length + 1) + " shown so far)" : "solved",
    approximate: "no solution in time: the best grid found, cost " + count(body.cost),
    unsolvable: "this puzzle has no solution",
    timeout: "no answer within the time limit",
  };
  return [words[body.status] || body.status + (body.error ? ": " + body.error : ""), body.status];
}

async function solve(seed, another) {
  if (!state.givens.some((v) => v)) {
    say("the grid is empty: type givens, paste a line, or pick a sample", "error");
    return;
  }
  if (!another) state.shown = [];
  const request = {
    puzzle: puzzleLine(),
    box: state.rows + "x" + state.cols,
    time_limit: parseFloat($("time-limit").value),
    portfolio: $("portfolio").value,
    seed: seed,
  };
  if (another && state.shown.length) request.exclude = state.shown.slice(-MAX_SHOWN);
  if (!(request.time_limit > 0)) delete request.time_limit;
  say("solving (at most " + (request.time_limit ? duration(request.time_limit) : "the default time") + ")...", "busy");
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
    const [words, kind] = verdict(body, Boolean(request.exclude));
    showAnswer(body, seed);
    say(words, kind);
    if (body.status === "solved" && !state.shown.includes(body.solution)) state.shown.push(body.solution);
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
  const seed = $("random-seed").value.trim();
  if (seed) params.set("seed", seed); // a string: seeds past 2^53 stay exact
  say("making a random puzzle...", "busy");
  try {
    const response = await fetch("/api/random?" + params.toString(), { credentials: "same-origin" });
    const body = await response.json();
    if (!response.ok) {
      say(body.error || "error " + response.status, "error");
      return;
    }
    loadLine(body.puzzle, body.box);
    const again = seed ? "" : " (type it into Seed to make this puzzle again)";
    say("random " + body.level + " puzzle, " + count(body.clues) + " givens, seed " + body.seed + again);
  } catch (e) {
    say("the server did not answer: " + e.message, "error");
  }
}

$("controls").addEventListener("submit", (event) => {
  event.preventDefault();
  solve(0, false);
});
$("again").addEventListener("click", () => solve(Math.floor(Math.random() * 2 ** 31) + 1, true));
$("random").addEventListener("click", randomPuzzle);
$("load").addEventListener("click", () => loadLine($("line").value, null));
$("line").addEventListener("keydown", (event) => {
  if (event.key === "Enter") {
    event.preventDefault();
    loadLine($("line").value, null);
  }
});
$("clear").addEventListener("click", () => {
  build(state.rows, state.cols, null);
  puzzleChanged(false);
});
$("box").addEventListener("change", () => {
  const box = boxOf($("box").value);
  build(box.rows, box.cols, null);
  puzzleChanged(false);
});
$("sample").addEventListener("change", () => {
  const option = $("sample").selectedOptions[0];
  if (option && option.value !== "") loadLine(option.dataset.puzzle, option.dataset.box, true);
});
build(3, 3, null);
