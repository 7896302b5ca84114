// Page behaviour: form <-> URL, calling pycore, drawing its answer. No memory arithmetic here.
// Everything from the URL or from pycore is written with textContent or .value, never as HTML.
// The page runs under a Content-Security-Policy (index.html): no inline scripts, styles or handlers.

import { chartLibrary, resizer, stackedChart } from "./charts.js";
import { bytesText, didYouMean, gbText, numberText, plural, splitUnit } from "./format.js";
import { paint } from "./palette.js";

const form = document.getElementById("form");
const statusLine = document.getElementById("status");
// The form is written once by build.py from the schema: its fields never change, so they are looked up once.
const FIELDS = [...form.querySelectorAll("[data-key]")];
const FORM_KEYS = new Set(FIELDS.map((node) => node.dataset.key));
const APPLIES = JSON.parse(document.getElementById("applies-table")?.textContent || "{}");

let run = null;          // pycore.output.web.run, once Python is ready
let headline = null;     // pycore.output.web.headline: a keystroke's total and fit, for its own frame
let pushNext = true;     // the first keystroke of an edit makes a history entry; the rest replace it
let shared = null;       // the result on screen to paste elsewhere, as pycore words it: {markdown, text} (report.share)

const defaults = Object.fromEntries(FIELDS.map((el) => [el.dataset.key, el.value]));

// A key given twice counts once, with its last value, as pycore's web.py reads a query.
const lastValue = (params, key) => { const all = params.getAll(key); return all.length ? all[all.length - 1] : null; };

/** The baseline's inputs (base.KEY, KEY a form field) from the URL, last value of each. */
function baseParams() {
  const params = new URLSearchParams(location.search);
  const out = new Map();
  for (const key of params.keys()) {
    if (key.startsWith("base.") && FORM_KEYS.has(key.slice(5))) out.set(key, lastValue(params, key));
  }
  return out;
}

/** URL keys the page does not pass on to pycore: neither a form field nor base.FIELD (config=, junk). */
function droppedKeys() {
  const dropped = new Set();
  for (const key of new URLSearchParams(location.search).keys()) {
    if (!FORM_KEYS.has(key) && !(key.startsWith("base.") && FORM_KEYS.has(key.slice(5)))) dropped.add(key);
  }
  return [...dropped];
}

function formQuery() {
  const params = new URLSearchParams();
  for (const el of FIELDS) {
    const value = el.value.trim();
    if (value !== "" && value !== defaults[el.dataset.key]) params.append(el.dataset.key, value);
  }
  // The baseline's inputs (base.KEY) have no fields of their own: they stay as the link gave them.
  for (const [key, value] of baseParams()) params.append(key, value);
  return params.toString();
}

function fillForm(query) {
  const params = new URLSearchParams(query);
  for (const el of FIELDS) {
    const value = lastValue(params, el.dataset.key);
    setValue(el, value === null ? defaults[el.dataset.key] : value);
    if (value !== null) el.closest("details")?.setAttribute("open", "");
  }
}

function setValue(el, value) {
  if (el.tagName === "SELECT" && ![...el.options].some((o) => o.value === value)) {
    el.dataset.pending = value;   // an unknown choice: let pycore name it, show the default meanwhile
    el.value = defaults[el.dataset.key];
  } else {
    delete el.dataset.pending;
    el.value = value;
  }
}

/** Another model chosen: a checkpoint's bytes read for the last one no longer describe it (issue 30), nor do an
 * imported config.json the link carried (config=) and the name it gave the model. */
function forgetCheckpoint() {
  for (const key of ["weight_bytes", "weight_files", "config", "name"]) {
    const field = form.querySelector(`[data-key="${key}"]`);
    if (field) setValue(field, defaults[key]);
  }
}

/** Inputs set from elsewhere (pasted launch settings, a checkpoint's headers) onto ``params``: a model other than the
 * form's leaves the model's inputs (its overrides, an imported config, its name, a checkpoint's bytes), as picking
 * one in the picker does. */
function setInputPairs(params, pairs) {
  const model = pairs.find(([key]) => key === "model");
  if (model && model[1] !== (params.get("model") ?? defaults.model)) {
    for (const field of form.querySelectorAll('fieldset[data-group="model"] [data-key]')) params.delete(field.dataset.key);
  }
  for (const [key, value] of pairs) params.set(key, value);
}

function requestQuery() {
  // Only form fields and base.FIELD reach pycore, never any other key a link carries (config= is a config.json's
  // text, which pycore reads; it refuses a path). Unknown <select> values still go, so pycore's message names them.
  const params = new URLSearchParams(formQuery());
  for (const el of FIELDS) if (el.dataset.pending !== undefined) params.set(el.dataset.key, el.dataset.pending);
  return params.toString();
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (cls) node.className = cls;
  return node;
}

const size = (record, bytes) => (record && record.text) || bytesText(bytes);

// Each keystroke redraws the results: nodes are reused and written only where they change, since every
// write costs the frame style, layout and paint (input to painted update within one frame, issue 12).
function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

function setHidden(node, hidden) {
  if (node.hidden !== hidden) node.hidden = hidden;
}

function setClass(node, cls) {
  if (node.className !== cls) node.className = cls;
}

/** Makes parent's children one per item: the nodes already there are reused, filled by fill(node, item, i). */
function syncChildren(parent, items, make, fill) {
  while (parent.children.length > items.length) parent.lastElementChild.remove();
  items.forEach((item, i) => {
    let node = parent.children[i];
    if (!node) {
      node = make(item);
      parent.append(node);
    }
    fill(node, item, i);
  });
}

/** A row of cells with the given classes, for syncChildren. */
function rowOf(...classes) {
  const tr = el("tr");
  for (const cls of classes) tr.append(el("td", "", cls || undefined));
  return tr;
}

// The catalog ids the model and GPU fields suggest from: the model picker's table (picker.js), the GPUs' <datalist>.
const MODELS = JSON.parse(document.getElementById("model-table")?.textContent || "[]");
const catalogIds = (list) => (list === "model-table" ? MODELS.map((m) => m.id)
  : [...document.querySelectorAll(`#${list} option`)].map((o) => o.value));
const SUGGEST = { model: "model-table", gpu: "gpu-list" };

function suggestion(key, node) {
  const id = didYouMean(node.value, catalogIds(SUGGEST[key]));
  if (!id) return null;
  const button = el("button", `Did you mean ${id}?`, "suggest");
  button.type = "button";
  button.addEventListener("click", () => {
    setValue(node, id);
    update("push");
    pushNext = true;
    node.focus();
  });
  return button;
}

/** The one click that fetches a hub id's config.json and imports it (import.js), as pycore words it (web.hub_offer). */
function hubButton(offer) {
  const button = el("button", offer.label, "suggest");
  button.type = "button";
  button.addEventListener("click", () => {
    document.getElementById("import").open = true;
    document.getElementById("import-hub").value = offer.id;
    document.getElementById("import-fetch").click();
  });
  return button;
}

function showErrors(errors, fallbacks = {}, offer = null) {
  for (const p of form.querySelectorAll(".error")) if (p.firstChild) p.textContent = "";
  for (const node of form.querySelectorAll(".invalid")) node.classList.remove("invalid");
  const box = document.getElementById("messages");
  if (box.firstChild) box.replaceChildren();
  for (const [key, message] of Object.entries(errors)) {
    const target = FORM_KEYS.has(key) ? form.querySelector(`[data-key="${CSS.escape(key)}"]`) : null;
    if (target) {
      target.classList.add("invalid");
      target.closest("details")?.setAttribute("open", "");
      const line = document.getElementById(`e-${key}`);
      const used = key in fallbacks ? "" : " — using the default.";   // pycore says the value it used instead
      line.textContent = `${message}${used}`;
      const hint = key === "model" && offer ? hubButton(offer)
        : key in SUGGEST && target.value.trim() ? suggestion(key, target) : null;
      if (hint) line.append(hint);
    }
    box.append(el("p", target && !(key in fallbacks) ? `${message} — using the default.` : message));
  }
  // pycore words the link's keys it is never given (web.unread), each shown safely (U+202E and the like as ?).
  const dropped = droppedKeys();
  if (dropped.length && window.pycoreUnread) {
    box.append(el("p", window.pycoreUnread(new URLSearchParams(dropped.map((key) => [key, ""])).toString())));
  }
}

/** Breakdown rows as records, from either shape: {key,label,bytes,text,percent} or [key,label,bytes]. */
function breakdownRows(payload, r) {
  const records = payload.breakdown.length && !Array.isArray(payload.breakdown[0]);
  const rows = payload.breakdown.map((row) => (Array.isArray(row) ? { key: row[0], label: row[1], bytes: row[2] } : row));
  // Records already carry the overhead rows (allocator cache, CUDA context, NCCL) and add up to the total.
  if (!records && !rows.some((row) => row.key === "overhead")) {
    rows.push({ key: "overhead", label: "Runtime overhead", bytes: r.overhead_bytes });
  }
  return rows.filter((row) => row.bytes > 0);
}

/** answers.charts (CONTRACT.md): memory against micro-batch and sequence length, when pycore sends them;
 * styles: pool key -> its style index (web.answers' styles), the same as the bar's and the comparison's. */
async function renderCharts(charts, styles) {
  const box = document.getElementById("charts");
  box.hidden = !charts;
  if (!charts) return;
  const uPlot = await chartLibrary();
  const legend = new Map();
  for (const name of ["batch", "seq"]) {
    const chart = charts[name];
    const [one, many] = [chart?.unit_one, chart?.unit_many];      // pycore's words: sequences, completions, tokens
    const unit = many;
    const holder = document.getElementById(`chart-${name}`);
    const note = document.getElementById(`chart-${name}-note`);
    const table = document.getElementById(`chart-${name}-data`);
    note.textContent = "";
    if (!chart || !chart.x || !chart.x.length) {
      holder.chart?.destroy();
      delete holder.chart;
      holder.replaceChildren();
      table.replaceChildren();
      continue;
    }
    // Each pool's colour is pycore's style index (report.chart_styles), the same as in the bar and the comparison.
    const styled = { ...chart, series: chart.series.map((s, k) => ({ ...s, style: styles?.[s.key] ?? k })) };
    styled.series.forEach((s) => legend.set(s.key, [s.label, s.style]));
    stackedChart(uPlot, holder, styled, unit, table);
    resizer.observe(holder);
    note.textContent = chart.largest_fitting === null || chart.largest_fitting === undefined
      ? "None of these fits the usable memory."
      : `Largest that fits: ${plural(chart.largest_fitting, one, many)} (marked).`;
  }
  const list = document.getElementById("chart-legend");
  list.replaceChildren();
  for (const [key, [label, style]] of legend) {
    const swatch = el("span", "", "swatch");
    paint(swatch, style);
    const item = el("li");
    item.dataset.pool = key;
    item.append(swatch, el("span", label, "legend-label"));
    list.append(item);
  }
}

const STATUS_WORDS = { fits: "fits", tight: "tight", no: "does not fit" };

function render(payload) {
  renderHeadline(payload);
  renderDetails(payload);
}

/** The total per GPU in bytes and as pycore words it (a build-time payload may carry only the bytes). */
function totalOf(payload) {
  const totalBytes = payload.total?.bytes ?? payload.result.total_bytes;
  return { totalBytes, totalText: payload.total?.text || bytesText(totalBytes) };
}

/** The total, its fit badges (the panel's and the phone's one-line bar) and any message: what a keystroke
 * changes first. */
function renderHeadline(payload) {
  showErrors(payload.errors, payload.fallbacks, payload.hub_offer);
  if (!payload.result) return;
  const r = payload.result;
  const { totalBytes, totalText } = totalOf(payload);
  const [number, unit] = splitUnit(totalText);
  setText(document.getElementById("total-gib"), number);
  setText(document.getElementById("total-unit"), unit);
  setText(document.getElementById("total-gb"), `(${payload.total?.gb_text || gbText(totalBytes)})`);
  const chosen = (payload.gpus || r.gpus).find((gpu) => gpu.chosen);
  for (const id of ["mini-badge", "total-badge"]) {
    const badge = document.getElementById(id);
    setHidden(badge, !chosen);
    if (chosen) {
      // The one-line bar on phones says only the verdict; the panel names the GPU.
      const verdict = chosen.verdict || `${STATUS_WORDS[chosen.status]} on ${chosen.name}`;
      setText(badge, id === "mini-badge" ? STATUS_WORDS[chosen.status] : verdict);
      if (badge.title !== verdict) badge.title = verdict;
      setClass(badge, `badge ${chosen.status}`);
    }
  }
  setText(document.getElementById("mini-total"), `${number} ${unit}`);
  document.documentElement.dataset.totalBytes = String(r.total_bytes);
  document.documentElement.dataset.peakBytes = String(r.peak_bytes);
  // A keystroke's payloads leave the formulas out (pycore.output.web.run(query, false)): the table below the
  // results is drawn once typing pauses, from the answers' payload. The build-time payloads carry them.
  // Until then the table still shows the last pause's numbers, dimmed.
  if (!payload.formulas) document.getElementById("formulas").classList.add("stale");
}

/** Everything else the estimate shows: the lines under the total, the bar, the breakdown, the GPU list,
 * the stages and which fields apply. */
function renderDetails(payload) {
  if (!payload.result) return;
  shared = payload.share || null;
  const r = payload.result;
  const { totalBytes, totalText } = totalOf(payload);
  const active = r.params.active !== r.params.total ? ` (${numberText(r.params.active)} active per token)` : "";
  // pycore words these sentences (pycore.output.report.summary), the same as the command line's table.
  setText(document.getElementById("peak-line"), payload.summary?.peak ||
    `Peak tensors ${bytesText(r.peak_bytes)} during the ${r.peak_phase} phase, plus ${bytesText(r.overhead_bytes)} runtime overhead.`);
  setText(document.getElementById("params-line"), payload.summary
    ? `${payload.summary.model}${active ? ` ${active.trim()}.` : ""}` : `${r.model.name}: ${plural(r.params.total, "parameter")}${active}.`);
  setText(document.getElementById("views-line"), payload.summary?.views || "");
  // What the estimate cannot vouch for (vLLM would not start, positions past the model's) stands by the total,
  // in red; what it assumes and the inputs it does not read, under it as plain notes. pycore says which is which
  // (report.message_kinds); a payload without kinds shows every message as a warning.
  const messages = payload.messages || (payload.warnings || []).map((text) => ({ kind: "warning", text }));
  for (const [id, kind] of [["warnings-line", "warning"], ["notes-line", "note"]]) {
    const texts = messages.filter((message) => message.kind === kind).map((message) => message.text);
    const line = document.getElementById(id);
    setHidden(line, !texts.length);
    setText(line, texts.join("\n"));      // one message a line (style.css: pre-line), never run together
  }

  // The bar is to scale: each segment's width is its row's share of the total.
  // Each row's colour is pycore's style index (report.chart_styles; palette.js), the same in every chart.
  const rows = breakdownRows(payload, r).map((row, i) => ({
    ...row, style: row.style ?? i,
    share: typeof row.percent === "number" ? row.percent : (100 * row.bytes) / totalBytes,
  }));
  const bar = document.getElementById("bar");
  syncChildren(bar, rows, () => el("span", "", "segment"), (segment, row) => {
    if (segment.dataset.share !== String(row.share)) {
      segment.style.width = `${row.share}%`;
      segment.dataset.share = String(row.share);
    }
    paint(segment, row.style);
    if (segment.dataset.pool !== row.key) segment.dataset.pool = row.key;
    const title = `${row.label}: ${size(row, row.bytes)}`;
    if (segment.title !== title) segment.title = title;
  });
  // The bar's numbers in its accessible name (the table under it gives them too).
  const barLabel = `Memory per GPU by component, to scale: ${rows.map((row) => `${row.label} ${size(row, row.bytes)} (${row.share.toFixed(1)}%)`).join("; ")}.`;
  if (bar.getAttribute("aria-label") !== barLabel) bar.setAttribute("aria-label", barLabel);
  const totalRow = { key: "total", label: "Total per GPU", text: totalText, share: 100 };
  syncChildren(document.querySelector("#breakdown tbody"), [...rows, totalRow], () => {
    const tr = rowOf("", "num", "num");
    tr.firstChild.append(el("span", "", "swatch"), document.createTextNode(""));
    return tr;
  }, (tr, row) => {
    const [name, bytes, share] = tr.children;
    if (row === totalRow) {
      setClass(tr, "total-row");
      delete tr.dataset.component;
    } else {
      setClass(tr, "");
      if (tr.dataset.component !== row.key) tr.dataset.component = row.key;
    }
    setHidden(name.firstChild, row === totalRow);
    paint(name.firstChild, row === totalRow ? null : row.style);
    if (name.lastChild.data !== row.label) name.lastChild.data = row.label;
    setText(bytes, size(row, row.bytes));
    setText(share, row === totalRow ? "100%" : `${row.share.toFixed(1)}%`);
  });

  renderParallelHeading(payload);
  renderFieldDefaults(payload.field_defaults);
  renderGpus(payload.gpus || r.gpus);
  renderStages(r);
  kind = r.model.kind === "generic" ? "generic" : "transformer";
  form.classList.toggle("generic", kind === "generic");
  setHidden(document.getElementById("generic-note"), kind !== "generic");
  showApplies();

  if (payload.formulas) renderFormulas(payload.formulas);
}

/** Inputs whose default comes from a catalog (the price: the chosen GPU's): the number an empty field stands
 * for, and the line under it with its source; the ZeRO field's line: the stage an FSDP strategy sets in its
 * place. As pycore words them (report.field_defaults). */
function renderFieldDefaults(shown) {
  for (const [key, { placeholder, text }] of Object.entries(shown || {})) {
    const input = document.getElementById(`f-${key}`);
    if (input && placeholder !== undefined && input.placeholder !== placeholder) input.placeholder = placeholder;
    const line = document.getElementById(`d-${key}`);
    if (line) setText(line, text);
  }
}

function renderFormulas(rows) {
  document.getElementById("formulas").classList.remove("stale");
  syncChildren(document.querySelector("#formulas tbody"), rows, () => {
    const tr = rowOf("", "formula", "num", "muted");
    const [, formula, , source] = tr.children;
    formula.append(el("code"), el("br"), el("code", "", "substituted"));
    source.append(document.createTextNode(""), el("br"), el("small"));
    return tr;
  }, (tr, f) => {
    const [name, formula, bytes, source] = tr.children;
    setClass(tr, f.name.startsWith("  ·") ? "term" : "");
    setText(name, f.name);
    const [code, br, substituted] = formula.children;
    setText(code, f.formula);
    const shown = Boolean(f.substituted && f.substituted !== f.formula);
    setHidden(br, !shown);
    setHidden(substituted, !shown);
    setText(substituted, shown ? `= ${f.substituted}` : "");
    setText(bytes, size(f, f.bytes));
    if (source.firstChild.data !== f.source) source.firstChild.data = f.source;
    setHidden(source.children[0], !f.symbols);
    setHidden(source.children[1], !f.symbols);
    setText(source.children[1], f.symbols || "");
  });
}

let gpuRows = [];

/** Every GPU: the chosen one first, then by headroom, filtered by the text box; not a nested scroll box. */
function renderGpus(gpus) {
  gpuRows = [...gpus].sort((x, y) => (y.chosen - x.chosen) || (y.headroom_bytes - x.headroom_bytes));
  const fitting = gpuRows.filter((gpu) => gpu.status !== "no").length;
  setText(document.getElementById("fits-heading"), `Fits on ${fitting} of ${plural(gpuRows.length, "GPU")}`);
  filterGpus();
}

const gpuWords = new Map();   // GPU id -> the lower-case words the filter searches
const FOLDED_GPUS = 5;        // rows a phone shows before "Show every GPU" (style.css: .gpus.folded)
let gpusUnfolded = false;

/** On a phone the list shows its first rows and a button for the rest, so the form is not 30 rows further down;
 * a filter shows every match. Wider screens show every row (style.css keeps the fold to max-width: 900px). */
function foldGpus(list, count, filtered) {
  const more = document.getElementById("gpus-more");
  list.classList.toggle("folded", !gpusUnfolded && !filtered);
  setHidden(more, filtered || count <= FOLDED_GPUS);
  setText(more, gpusUnfolded ? more.dataset.fewer : more.dataset.more);
  more.setAttribute("aria-expanded", String(gpusUnfolded));
}

function filterGpus() {
  const words = document.getElementById("gpu-filter").value.trim().toLowerCase().split(/\s+/).filter(Boolean);
  const shown = !words.length ? gpuRows : gpuRows.filter((gpu) => {
    let haystack = gpuWords.get(gpu.id);
    if (haystack === undefined) {
      haystack = `${gpu.id} ${gpu.name} ${gpu.memory_text}`.toLowerCase();
      gpuWords.set(gpu.id, haystack);
    }
    return words.every((word) => haystack.includes(word));
  });
  const list = document.getElementById("gpus");
  foldGpus(list, shown.length, words.length > 0);
  if (!shown.length && gpuRows.length) {
    list.replaceChildren(el("li", "No GPU matches the filter.", "muted"));
    return;
  }
  if (list.firstElementChild && !list.firstElementChild.dataset.gpu) list.replaceChildren();   // the no-match line
  syncChildren(list, shown, () => {
    const item = el("li");
    item.append(el("span", "", "gpu-name"), el("span", "", "muted"), el("span"), el("span", "", "muted"));
    return item;
  }, (item, gpu) => {
    setClass(item, `gpu ${gpu.status}${gpu.chosen ? " chosen" : ""}`);
    if (item.dataset.gpu !== gpu.id) item.dataset.gpu = gpu.id;
    const headroom = String(gpu.headroom_bytes);
    if (item.dataset.headroom !== headroom) item.dataset.headroom = headroom;
    const [name, usable, badge, free] = item.children;
    setText(name, gpu.name);
    setText(usable, `${gpu.memory_text} usable`);
    setText(badge, STATUS_WORDS[gpu.status]);
    setClass(badge, `badge ${gpu.status}`);
    setText(free, gpu.headroom_text);
  });
}

// ---- Only what applies: pycore/inputs/applies.py's table, written into the page by build.py.
let kind = "transformer";

function currentValues() {
  const values = Object.fromEntries(FIELDS.map((node) => [node.dataset.key, node.value.trim() || defaults[node.dataset.key]]));
  values.kind = kind;
  // pycore/inputs/applies.py's DERIVED keys, read from the inputs the same way.
  const chosen = values.activations || "detailed";
  const shaped = Boolean(values.layers) && Boolean(values.hidden);
  values.act_model = kind === "generic" && chosen === "detailed" ? (shaped ? "multiplier" : "none") : chosen;
  values.counted_by = kind === "generic" ? values.act_model : "transformer";
  values.served_by = values.mode === "infer" ? values.engine : "pytorch";
  return values;
}

function applies(key, values) {
  for (const [other, allowed] of Object.entries(APPLIES[key] || {})) {
    const current = values[other] ?? "";
    if (Array.isArray(allowed) ? !allowed.includes(current) : allowed.not.includes(current)) return false;
  }
  return true;
}

// The form's structure does not change: each field's box, and the boxes in each folded section and group.
const BOXES = FIELDS.map((node) => node.closest(".field"));
const SECTIONS = [...form.querySelectorAll("details.more[data-folded]")]
  .map((section) => [section, [...section.querySelectorAll(".field")], false]);
const GROUPS = [...form.querySelectorAll("fieldset.group")]
  .map((group) => [group, [...group.querySelectorAll(".field")], Boolean(group.querySelector(".import"))]);
// Each folded section's summary line and the inputs inside it, by the section's name.
const SUMMARIES = Object.fromEntries([...form.querySelectorAll("details[data-folded] > summary")]
  .map((summary) => [summary.parentElement.dataset.folded, [summary, [...summary.parentElement.querySelectorAll("[data-key]")]]]));

/** Hide the inputs that do not apply; one given a value anyway stays, marked "ignored here". */
function showApplies() {
  const values = currentValues();
  const ignored = [];
  FIELDS.forEach((node, i) => {
    const key = node.dataset.key;
    const box = BOXES[i];
    const apply = applies(key, values);
    const given = node.value.trim() !== "" && node.value.trim() !== defaults[key];
    setHidden(box, (!apply || box.dataset.onlyGiven !== undefined) && !given);
    box.classList.toggle("ignored", !apply && given);
    if (!apply && given) ignored.push(key);
  });
  for (const [container, boxes, always] of [...SECTIONS, ...GROUPS]) {
    setHidden(container, !always && boxes.every((box) => box.hidden));
  }
  const note = document.getElementById("ignored-note");
  setHidden(note, !ignored.length);
  setText(note, ignored.length ? `Ignored in this situation: ${ignored.join(", ")}.` : "");
  headings(values);
}

let parallelDrawn = false;   // whether Python's parallel_heading is on the page yet

/** The parallel section's summary: pycore's words for the layout it estimated (web.run's parallel_heading,
 * pycore.output.report.parallel_heading), never a product of the form's numbers. */
function renderParallelHeading(payload) {
  const [parallel] = SUMMARIES.parallel || [];
  if (!parallel || !payload.parallel_heading) return;
  parallelDrawn = true;
  delete parallel.dataset.pending;
  setText(parallel, payload.parallel_heading);
}

/** Folded sections' summaries say what is set inside them. */
function headings(values) {
  const [parallel, parallelInputs] = SUMMARIES.parallel || [];
  // Before Python's first word on a link that sets the layout, the build-time words ("Single GPU") would be
  // wrong: the summary waits for Python instead.
  if (parallel && !parallelDrawn && parallelInputs.some((node) => node.value.trim() !== "" && node.value !== defaults[node.dataset.key])) {
    parallel.dataset.pending = "";
    setText(parallel, "Parallel layout — waiting for Python…");
  }
  for (const [group, words] of [["model", "Architecture overrides"], ["precision", "Per-pool dtypes"]]) {
    if (!SUMMARIES[group]) continue;
    const [summary, inputs] = SUMMARIES[group];
    const set = inputs.filter((node) => node.value.trim() !== "" && node.value !== defaults[node.dataset.key]).length;
    setText(summary, set ? `${words} (${set} set)` : words);
  }
}

// URL writes trail the keystrokes by a moment: browsers cap history calls (Chromium ignores those past
// 200 in 10 s, WebKit throws past 100 in 30 s). https://github.com/mdn/content/issues/35504
let urlTimer = null;
let urlMode = null;

function writeUrl() {
  clearTimeout(urlTimer);
  urlTimer = null;
  const query = formQuery();
  const url = `${location.pathname}${query ? "?" + query : ""}`;
  if (url !== location.pathname + location.search) {
    if (urlMode === "push") history.pushState(null, "", url);
    else history.replaceState(null, "", url);
  }
  urlMode = null;
  document.getElementById("link-field").value = location.href;
}

function scheduleUrl(mode) {
  if (urlMode === null) urlMode = mode;
  clearTimeout(urlTimer);
  urlTimer = setTimeout(writeUrl, 150);
}

/** A button that sets some inputs (a layout from the plan, a fix) and re-estimates. */
function applyButton(label, query) {
  const button = el("button", label);
  button.type = "button";
  button.addEventListener("click", () => {
    for (const [key, value] of Object.entries(query)) {
      const field = form.querySelector(`[data-key="${CSS.escape(key)}"]`);
      if (field) { setValue(field, value); field.closest("details")?.setAttribute("open", ""); }
    }
    update("push");
    pushNext = true;
  });
  return button;
}

/** The plan (layouts that fit, best first) and vLLM's start-up log lines, as pycore words them. */
function renderPlans(a) {
  const plans = document.getElementById("plans");
  plans.replaceChildren();
  const options = (a.plan || []).filter((option) => option.label !== "as given");
  if (options.length) plans.append(el("li", "Layouts that fit, fewest GPUs first, then least compute:", "lead"));
  for (const option of options) {
    const item = el("li", undefined, "fix fits");
    item.append(applyButton(option.label, option.query), el("span", ` → ${option.text}`));
    plans.append(item);
  }
  renderPlacements(a.placements);
  const log = document.getElementById("vllm-log");
  log.replaceChildren();
  log.hidden = !(a.vllm_log || []).length;
  for (const line of a.vllm_log || []) log.append(el("li", line));
}

/** GRPO: a colocated vLLM engine or a vLLM server on GPUs of its own, fewest GPUs first, each a button that sets
 * it where it fits (pycore.answers.rollout_answers.placements' words). */
function renderPlacements(placements) {
  const list = document.getElementById("placements");
  list.replaceChildren();
  const options = placements?.options || [];
  if (options.length) list.append(el("li", placements.lead, "lead"));
  for (const option of options) {
    const item = el("li", undefined, option.query ? "fix fits" : "fix");
    if (option.query) item.append(applyButton(option.label, option.query), el("span", ` → ${option.text}`));
    else item.append(el("span", `${option.label}: ${option.text}`));
    list.append(item);
  }
}

/** The answers as pycore words them (web.answers' display: pycore.output.report.display_answers), drawn
 * verbatim; the build-time payloads carry them too. */
function renderAnswers(a, display) {
  renderPlans(a);
  const list = document.getElementById("answers");
  list.replaceChildren();
  for (const row of display || []) list.append(el("dt", row.label), el("dd", row.text));
  renderPrecisionDefault(a.precision_default);
  renderFixes(a);
}

/** The precision the framework's default implies and what fp32 master weights would cost (pycore's sentence,
 * answers.compare.precision_default), with a button that sets it. */
function renderPrecisionDefault(note) {
  const box = document.getElementById("precision-default");
  box.replaceChildren();
  box.hidden = !note;
  if (!note) return;
  const item = el("li", undefined, "fix");
  item.append(el("span", `${note.text} `), applyButton(note.change, note.query));
  box.append(item);
}

function renderFixes(a) {
  const fixes = document.getElementById("how-to-fit");
  fixes.replaceChildren();
  const chosen = gpuRows.find((gpu) => gpu.chosen);
  if (a.how_to_fit.length) {
    fixes.append(el("li", `It does not fit on the ${chosen ? chosen.name : "chosen GPU"}. Changes, alone or combined — those that fit first, cheapest first:`, "lead"));
  }
  for (const fix of a.how_to_fit) {
    const item = el("li", undefined, fix.fits ? "fix fits" : "fix");
    item.append(applyButton(fix.change, fix.query),
      el("span", ` → ${fix.text || fix.total_text || bytesText(fix.total_bytes)}`));
    fixes.append(item);
  }
}

function renderStages(r) {
  const stages = document.getElementById("stages");
  setHidden(stages, !(r.stages && r.stages.length));       // one stage (pp=1) has no table
  syncChildren(stages.querySelector("tbody"), r.stages || [], () => rowOf("", "num", "num", ""), (tr, stage) => {
    const cells = [String(stage.stage), String(stage.layers), stage.text || bytesText(stage.peak_bytes), stage.peak_phase];
    cells.forEach((text, i) => setText(tr.children[i], text));
  });
}

/** The comparison as pycore words it (web.answers' comparison: pycore.output.report.display_comparison),
 * every cell drawn verbatim. */
function renderComparison(c, styles) {
  const box = document.getElementById("comparison");
  box.hidden = !c;
  if (!c) return;
  document.getElementById("compare-what").textContent = c.what;
  const message = document.getElementById("compare-message");
  message.textContent = c.message;
  message.classList.toggle("negative", c.negative);
  const body = document.querySelector("#compare-table tbody");
  body.replaceChildren();
  for (const row of c.rows) {
    const tr = el("tr", undefined, row.key === "total" ? "total-row" : undefined);
    tr.dataset.row = row.key;
    const name = el("td");
    if (typeof row.this_percent === "number") {       // a component: its swatch, as in the bars and charts
      const swatch = el("span", "", "swatch");
      paint(swatch, styles?.[row.key] ?? c.rows.indexOf(row));
      name.append(swatch);
    }
    name.append(el("span", row.label, "row-label"));
    tr.append(name, el("td", row.this, "num"), el("td", row.baseline, "num"), el("td", row.difference, "num"));
    body.append(tr);
  }
  renderCompareBars(c, styles);
}

/** The comparison as two bars to one scale (pycore's shares of the larger total), each component in its colour. */
function renderCompareBars(c, styles) {
  const box = document.getElementById("compare-bars");
  box.replaceChildren();
  const parts = c.rows.filter((row) => typeof row.this_percent === "number")
    .map((row, i) => ({ ...row, style: styles?.[row.key] ?? i }));
  box.hidden = !parts.length;
  const total = c.rows.find((row) => row.key === "total");
  for (const [column, share, text] of [["this", "this_percent", "this"], ["baseline", "baseline_percent", "baseline"]]) {
    const line = el("div", undefined, "compare-line");
    const bar = el("div", undefined, "bar");
    bar.setAttribute("role", "img");
    const shown = parts.filter((row) => row[share] > 0);
    bar.setAttribute("aria-label", `${c.labels[column]}: ${total ? total[text] : ""}; ` +
      shown.map((row) => `${row.label} ${row[text]}`).join("; "));
    for (const row of shown) {
      const segment = el("span", "", "segment");
      segment.style.width = `${row[share]}%`;
      segment.dataset.pool = row.key;
      segment.title = `${row.label}: ${row[text]}`;
      paint(segment, row.style);
      bar.append(segment);
    }
    line.append(el("span", `${c.labels[column]} · ${total ? total[text] : ""}`, "compare-name"), bar);
    box.append(line);
  }
}

// The answers re-run the estimate dozens of times: they follow the breakdown once typing pauses.
let answersTimer = null;
let answersRound = 0;       // the latest answers; an older round still drawing its charts does not end it

function scheduleAnswers() {
  clearTimeout(answersTimer);
  document.documentElement.dataset.answersPending = "1";
  const round = ++answersRound;
  answersTimer = setTimeout(async () => {
    flushDetails();
    aheadRound++;
    performance.mark("answers-start");      // benchmarks/page_speed.py reads the "answers" measure
    const query = requestQuery();
    const payload = JSON.parse(window.pycoreAnswersFor(query));    // made while typing, or now (main.py)
    if (payload.formulas) renderFormulas(payload.formulas);
    if (payload.answers) {
      renderAnswers(payload.answers, payload.display);
      renderComparison(payload.comparison, payload.styles);
    }
    const baseErrors = Object.entries(payload.errors).filter(([key]) => key.startsWith("base."));
    for (const [, message] of baseErrors) document.getElementById("messages").append(el("p", message));
    if (payload.answers) await renderCharts(payload.answers.charts, payload.styles);   // the chart library may still be loading
    if (round === answersRound) {
      performance.measure("answers", "answers-start");
      delete document.documentElement.dataset.answersPending;
    }
  }, 120);
}

// While a person types, the answers for the latest breakdown are made in slices of a few estimates
// (main.py answers_slice; pycore/base/steps.py) between keystrokes, at background priority, so they are ready
// when typing pauses; a keystroke stops them and its own details begin them anew.
let aheadRound = 0;
const later = (task) => (window.scheduler?.postTask ? window.scheduler.postTask(task, { priority: "background" }) : setTimeout(task));

function answersAhead(query) {
  window.pycoreAnswersBegin(query);
  const round = ++aheadRound;
  const slice = () => {
    if (round === aheadRound && !window.pycoreAnswersSlice(4)) later(slice);
  };
  later(slice);
}

// A keystroke's own frame shows the total and its verdict (pycore.output.web.headline, a third of the work of
// web.run); the details follow in the frame after, from web.run, so the key is answered within a frame
// (its Event Timing, benchmarks/page_speed.py) and typing fast draws the details once for the latest key.
let pendingDetails = null;

function detailsAfterFrame(query) {
  if (pendingDetails === null) requestAnimationFrame(() => setTimeout(flushDetails));
  pendingDetails = query;
}

function flushDetails() {
  if (pendingDetails === null) return;
  const query = pendingDetails;
  pendingDetails = null;
  const payload = JSON.parse(run(query, false));
  renderDetails(payload);     // the headline for this query is drawn already (web.headline agrees with web.run)
  if (payload.result) answersAhead(query);
}

/** After a change made by a button (not typing): the next keystroke starts a new history entry. */
function editDone() {
  pushNext = true;
}

function update(historyMode) {
  if (historyMode) scheduleUrl(historyMode);
  else document.getElementById("link-field").value = location.href;
  if (!run) { shared = null; showApplies(); return; }
  aheadRound++;
  const query = requestQuery();
  const payload = JSON.parse(headline(query));
  renderHeadline(payload);
  if (window.__firstResultMs === undefined) window.__firstResultMs = performance.now();
  if (payload.result) {
    detailsAfterFrame(query);
    scheduleAnswers();
  } else delete document.documentElement.dataset.answersPending;   // the page keeps the last result's
  window.dispatchEvent(new Event("pycore-update"));     // panels showing this setup (launch.js) redraw
}

// Catalog names are checked once typing pauses (or the field is left), not at each keystroke: "mixt"
// is not an error on the way to "mixtral-8x7b-v0.1".
const TYPED_NAMES = new Set(["model", "gpu"]);
const TYPING_PAUSE_MS = 450;
let typingTimer = null;
let typingMode = null;

// The model named before its field was edited: once the name is settled, a checkpoint's bytes read for that model
// are forgotten if it is another one (retyping the same name keeps them).
let modelBefore = null;

function linkedModel() {
  return new URLSearchParams(location.search).get("model") ?? defaults.model;
}

/** The model's name is settled (typing paused, or a preset picked): forget the checkpoint if it names another. */
function settleModel(picked = false) {
  if (modelBefore === null && !picked) return;
  const before = modelBefore ?? linkedModel();
  if (form.querySelector('[data-key="model"]').value.trim() !== before.trim()) forgetCheckpoint();
  modelBefore = null;
}

function flushTyping() {
  settleModel();
  if (typingTimer === null) return;
  clearTimeout(typingTimer);
  typingTimer = null;
  update(typingMode);
}

// Enter in a field submits that field's own form (build.py field_html): the page never leaves.
form.addEventListener("submit", (event) => event.preventDefault());
form.addEventListener("input", (event) => {
  if (!event.target.dataset.key) return;
  if (event.target.dataset.pending !== undefined) delete event.target.dataset.pending;
  if (event.target.dataset.key === "model") modelBefore ??= linkedModel();
  const mode = pushNext ? "push" : "replace";
  pushNext = false;
  if (TYPED_NAMES.has(event.target.dataset.key) && run) {
    if (typingTimer === null) typingMode = mode;
    clearTimeout(typingTimer);
    document.documentElement.dataset.answersPending = "1";
    typingTimer = setTimeout(flushTyping, TYPING_PAUSE_MS);
    return;
  }
  flushTyping();
  update(mode);
});
form.addEventListener("change", () => {
  flushTyping();
  if (urlMode !== null) writeUrl();       // one history entry per edited field
  pushNext = true;
});
document.getElementById("gpu-filter").addEventListener("input", filterGpus);
document.getElementById("gpus-more").addEventListener("click", () => { gpusUnfolded = !gpusUnfolded; filterGpus(); });
document.getElementById("print").addEventListener("click", () => window.print());
window.addEventListener("popstate", () => { fillForm(location.search); update(null); });

document.getElementById("copy-link").addEventListener("click", async () => {
  flushTyping();
  if (urlTimer !== null) writeUrl();      // the link of the inputs on screen, not of a moment ago
  const field = document.getElementById("link-field");
  field.value = location.href;
  try {
    await navigator.clipboard.writeText(location.href);
    statusLine.textContent = "Link copied.";
  } catch {
    field.select();
    statusLine.textContent = "Select the link below and copy it.";
  }
});

// "Copy results": pycore's Markdown (or plain text) of the result on screen, made for these very inputs
// (web.run's share; python -m pycore --markdown prints the same). A keystroke still waiting is drawn first.
document.getElementById("copy-results").addEventListener("click", async () => {
  flushTyping();
  flushDetails();
  const field = document.getElementById("share-field");
  const plain = document.getElementById("copy-as").value === "text";
  const text = shared && (plain ? shared.text : shared.markdown);
  if (!text) {
    statusLine.textContent = "No result to copy yet.";
    return;
  }
  try {
    await navigator.clipboard.writeText(text);
    field.hidden = true;
    statusLine.textContent = plain ? "Results copied as plain text." : "Results copied as Markdown.";
  } catch {
    field.value = text;
    field.hidden = false;
    field.select();
    statusLine.textContent = "Select the results below and copy them.";
  }
});

document.getElementById("download-csv").addEventListener("click", () => {
  const url = URL.createObjectURL(new Blob([window.pycoreCsv(requestQuery())], { type: "text/csv" }));
  const a = el("a");
  a.href = url;
  a.download = "gpu-memory-estimate.csv";
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 0);
});

function enableControls() {
  for (const control of [...FIELDS, ...document.querySelectorAll(".actions button, #import textarea, #import input, #import button, #fits-run")]) {
    control.disabled = false;
  }
}

function ready() {
  if (run || !window.pycoreRun) return;
  run = window.pycoreRun;
  headline = window.pycoreHeadline;
  enableControls();
  statusLine.classList.remove("failed");
  statusLine.textContent = "Ready. Results update as you type.";
  update(null);
}

// What the page needs to start Python, with the words a failure names it by.
const NEEDED = [
  ["./pyscript/core.js", "PyScript (pyscript/core.js)"], ["./pyscript.json", "PyScript's settings (pyscript.json)"],
  ["./main.py", "the page's Python (main.py)"], ["./pyodide/pyodide.mjs", "Pyodide (pyodide/pyodide.mjs)"],
  ["./pyodide/start.mjs", "Pyodide's start-up (pyodide/start.mjs)"],
  ["./pyodide/pyodide.asm.mjs", "Pyodide (pyodide/pyodide.asm.mjs)"],
  ["./pyodide/pyodide.asm.wasm", "Pyodide's WebAssembly (pyodide/pyodide.asm.wasm)"],
  ["./pyodide/python_stdlib.zip", "Python's standard library (pyodide/python_stdlib.zip)"],
];
let probing = null;

/** Asks the server for every needed file at once (HEAD: no body) and names the first that does not come. */
function probe() {
  if (run) return Promise.resolve();
  // The wheels PyScript installs (pycore's among them) are named in pyscript.json's packages.
  const packages = fetch("./pyscript.json", { cache: "no-store" }).then((response) => response.json())
    .then((config) => (config.packages || []).filter((name) => name.startsWith("./"))
      .map((url) => [url, `the estimator's package (${url.slice(2)})`]), () => []);
  probing ??= packages.then((wheels) => {
    const needed = [...NEEDED, ...wheels];
    return Promise.all(needed.map(([url]) => fetch(url, { method: "HEAD", cache: "no-store" })
      .then((response) => response.ok, () => false)))
      .then((ok) => needed.find((_, i) => !ok[i]));
  })
    .then((missing) => {
      if (missing) failed(`${missing[1]} could not be loaded`);
    })
    .finally(() => { probing = null; });
  return probing;
}

function failed(reason) {
  if (run) return;
  statusLine.textContent = `Python could not start in this browser, so no estimate can be shown: ${reason}. ` +
    "The form still works and its link can be shared; reload to try again, or run python -m pycore locally.";
  statusLine.classList.add("failed");
  document.documentElement.classList.add("py-failed");
  enableControls();
}

// A <script> or <link> that fails to load fires "error" on itself, seen here in the capture phase. A
// module fails too when one it imports does (start.mjs when pyodide.mjs is missing): the probe names
// the file that is really missing, else the element's own.
window.addEventListener("error", (event) => {
  if (event.target instanceof HTMLScriptElement || event.target instanceof HTMLLinkElement) {
    const src = event.target.src || event.target.href || "a file";
    probe().then(() => {
      if (!run && !statusLine.classList.contains("failed")) {
        failed(`${src.slice(src.lastIndexOf("/") + 1).slice(0, 80)} could not be loaded`);
      }
    });
  } else if (!run) {
    probe().then(() => { if (!run && !statusLine.classList.contains("failed")) failed(String(event.message || "script error").slice(0, 200)); });
  }
}, true);
window.addEventListener("unhandledrejection", (event) => {
  if (!run) probe().then(() => { if (!run && !statusLine.classList.contains("failed")) failed(String(event.reason).slice(0, 200)); });
});
window.addEventListener("pycore-ready", ready);
// PyScript reports some load failures only in its own console output: look for the missing file soon
// and then now and again, so a failure is said within seconds rather than at the 90-second limit.
for (const ms of [2500, 6000, 12000, 24000, 48000]) setTimeout(probe, ms);
setTimeout(() => failed("it did not finish loading within 90 seconds"), 90000);

// startup.js paints the answer build.py computed with pycore, before Python is ready.
window.pycorePaint = (payload, answers) => {
  render(payload);
  if (payload.result && answers?.answers) { renderAnswers(answers.answers, answers.display); renderComparison(answers.comparison, answers.styles); }
};

// Phones: the one-line total (#mini) appears once the panel's own total has scrolled away.
new IntersectionObserver(([entry]) => {
  document.documentElement.classList.toggle("summary-away", !entry.isIntersecting);
}).observe(document.querySelector(".summary"));

fillForm(location.search);
document.getElementById("link-field").value = location.href;
showApplies();
ready();

// The panels in their own modules (import.js, fits.js) take what they need from here.
export { MODELS, editDone, el, fillForm, form, formQuery, requestQuery, setInputPairs, settleModel, update };
