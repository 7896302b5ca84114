// Page behaviour: form <-> URL, calling pycore, drawing its answer. No memory arithmetic here.
// Everything from the URL or from pycore is written with textContent or .value, never as HTML.

const form = document.getElementById("form");
const statusLine = document.getElementById("status");
const fields = () => [...form.querySelectorAll("[data-key]")];
const GIB = 2 ** 30;
const COLORS = ["#3b6fd8", "#8a5cd6", "#d6683b", "#2f9e7a", "#d6a93b", "#c2477a", "#5aa0c8", "#7a8b3b", "#999"];

let run = null;          // pycore.web.run, once Python is ready
let pushNext = true;     // the first keystroke of an edit makes a history entry; the rest replace it

const defaults = Object.fromEntries(fields().map((el) => [el.dataset.key, el.value]));

function formQuery() {
  const params = new URLSearchParams();
  for (const el of fields()) {
    const value = el.value.trim();
    if (value !== "" && value !== defaults[el.dataset.key]) params.append(el.dataset.key, value);
  }
  // The baseline's inputs (base.KEY) have no fields of their own: they stay as the link gave them.
  for (const [key, value] of new URLSearchParams(location.search)) {
    if (key.startsWith("base.")) params.append(key, value);
  }
  return params.toString();
}

function fillForm(query) {
  const params = new URLSearchParams(query);
  for (const el of fields()) {
    const value = params.get(el.dataset.key);
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

function requestQuery() {
  // Unknown <select> values from the URL still reach pycore so its message names them.
  const params = new URLSearchParams(formQuery());
  for (const el of fields()) if (el.dataset.pending !== undefined) params.set(el.dataset.key, el.dataset.pending);
  for (const [key, value] of new URLSearchParams(location.search)) {
    if (!form.querySelector(`[data-key="${CSS.escape(key)}"]`) && !key.startsWith("base.")) params.append(key, value);
  }
  return params.toString();
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (cls) node.className = cls;
  return node;
}

const gib = (bytes) => (bytes / GIB).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });

function showErrors(errors) {
  for (const p of form.querySelectorAll(".error")) p.textContent = "";
  for (const node of form.querySelectorAll(".invalid")) node.classList.remove("invalid");
  const box = document.getElementById("messages");
  box.replaceChildren();
  for (const [key, message] of Object.entries(errors)) {
    const target = form.querySelector(`[data-key="${CSS.escape(key)}"]`);
    if (target) {
      target.classList.add("invalid");
      target.closest("details")?.setAttribute("open", "");
      document.getElementById(`e-${key}`).textContent = `${message} — using the default.`;
    }
    box.append(el("p", target ? `${message} — using the default.` : message));
  }
}

function render(payload) {
  showErrors(payload.errors);
  if (!payload.result) return;
  const r = payload.result;
  document.getElementById("total-gib").textContent = gib(r.total_bytes);
  document.getElementById("total-gb").textContent = `(${(r.total_bytes / 1e9).toFixed(2)} GB)`;
  document.getElementById("peak-line").textContent =
    `Peak tensors ${gib(r.peak_bytes)} GiB during the ${r.peak_phase} phase, plus ${gib(r.overhead_bytes)} GiB runtime overhead.`;
  const active = r.params.active !== r.params.total ? ` (${r.params.active.toLocaleString("en-US")} active per token)` : "";
  document.getElementById("params-line").textContent =
    `${r.model.name}: ${r.params.total.toLocaleString("en-US")} parameters${active}.`;

  const rows = [...payload.breakdown.map(([key, label, bytes]) => ({ key, label, bytes })),
    { key: "overhead", label: "Runtime overhead", bytes: r.overhead_bytes }].filter((row) => row.bytes > 0);
  const bar = document.getElementById("bar");
  const body = document.querySelector("#breakdown tbody");
  bar.replaceChildren();
  body.replaceChildren();
  rows.forEach((row, i) => {
    const share = (100 * row.bytes) / r.total_bytes;
    const segment = el("span", "", "segment");
    segment.style.width = `${share}%`;
    segment.style.background = COLORS[i % COLORS.length];
    segment.title = `${row.label}: ${gib(row.bytes)} GiB`;
    bar.append(segment);
    const tr = el("tr");
    tr.dataset.component = row.key;
    const name = el("td");
    const swatch = el("span", "", "swatch");
    swatch.style.background = COLORS[i % COLORS.length];
    name.append(swatch, row.label);
    tr.append(name, el("td", gib(row.bytes), "num"), el("td", `${share.toFixed(1)}%`, "num"));
    body.append(tr);
  });
  const total = el("tr", undefined, "total-row");
  total.append(el("td", "Total per GPU"), el("td", gib(r.total_bytes), "num"), el("td", "100%", "num"));
  body.append(total);

  const list = document.getElementById("gpus");
  list.replaceChildren();
  for (const gpu of [...r.gpus].sort((x, y) => y.chosen - x.chosen)) {
    const item = el("li", undefined, `gpu ${gpu.status}${gpu.chosen ? " chosen" : ""}`);
    item.dataset.gpu = gpu.id;
    const word = { fits: "fits", tight: "tight", no: "does not fit" }[gpu.status];
    const headroom = gpu.headroom_bytes >= 0 ? `${gib(gpu.headroom_bytes)} GiB free` : `${gib(-gpu.headroom_bytes)} GiB short`;
    item.append(el("span", gpu.name, "gpu-name"), el("span", `${gib(gpu.memory_bytes)} GiB usable`, "muted"),
      el("span", word, `badge ${gpu.status}`), el("span", headroom, "muted"));
    list.append(item);
  }

  renderStages(r);
  const generic = r.model.kind === "generic";
  form.classList.toggle("generic", generic);
  document.getElementById("generic-note").hidden = !generic;

  const formulas = document.querySelector("#formulas tbody");
  formulas.replaceChildren();
  for (const f of payload.formulas) {
    const tr = el("tr");
    if (f.name.startsWith("  ·")) tr.className = "term";
    tr.append(el("td", f.name), el("td", f.formula, "formula"), el("td", gib(f.bytes), "num"), el("td", f.source, "muted"));
    formulas.append(tr);
  }
  document.documentElement.dataset.totalBytes = String(r.total_bytes);
  document.documentElement.dataset.peakBytes = String(r.peak_bytes);
}

// URL writes trail the keystrokes by a moment: browsers cap history calls (Chromium ignores those past
// 200 in 10 s, WebKit throws past 100 in 30 s). https://github.com/mdn/content/issues/35504
let urlTimer = null;
let urlMode = null;

function writeUrl() {
  clearTimeout(urlTimer);
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

function renderAnswers(a, r) {
  const list = document.getElementById("answers");
  list.replaceChildren();
  const add = (term, value) => list.append(el("dt", term), el("dd", value));
  const count = (n, unit) => (n === null || n === undefined ? "none fits" : `${n.toLocaleString("en-US")} ${unit}`);
  if ("gpus_needed" in a) add("GPUs needed", count(a.gpus_needed, "GPUs (dp × tp × pp × cp)"));
  if (!("max_concurrency" in a)) add("Largest micro-batch", count(a.max_batch, "sequences"));
  if ("max_concurrency" in a) {
    add("Concurrent sequences", count(a.max_concurrency, "of prompt + new tokens"));
    add("Longest context", count(a.max_context, "tokens at this batch"));
  } else if (a.max_seq !== null) add("Longest sequence", count(a.max_seq, "tokens at this batch"));
  if (a.cost) {
    if (a.cost.hours !== null) {
      add("Training time", `${(a.cost.hours / 24).toLocaleString("en-US", { maximumFractionDigits: 1 })} days on ${a.cost.gpus} GPUs`);
    }
    if (a.cost.cost_usd !== null) add("Training cost", `$${Math.round(a.cost.cost_usd).toLocaleString("en-US")} at $${a.cost.price_usd_per_gpu_hour}/GPU-hour`);
    if (a.cost.why_not) add("Time and cost", a.cost.why_not);
  }
  if (r.host_bytes) add("Host RAM for offload", `${gib(r.host_bytes)} GiB per GPU`);
  const fixes = document.getElementById("how-to-fit");
  fixes.replaceChildren();
  const chosen = r.gpus.find((gpu) => gpu.chosen);
  if (a.how_to_fit.length) fixes.append(el("li", `It does not fit on the ${chosen ? chosen.name : "chosen GPU"}. One change at a time:`, "lead"));
  for (const fix of a.how_to_fit) {
    const item = el("li", undefined, fix.fits ? "fix fits" : "fix");
    const button = el("button", fix.change);
    button.type = "button";
    button.addEventListener("click", () => {
      for (const [key, value] of Object.entries(fix.query)) {
        const field = form.querySelector(`[data-key="${CSS.escape(key)}"]`);
        if (field) { setValue(field, value); field.closest("details")?.setAttribute("open", ""); }
      }
      update("push");
      pushNext = true;
    });
    item.append(button, el("span", ` → ${gib(fix.total_bytes)} GiB${fix.fits ? " (fits)" : ""}`));
    fixes.append(item);
  }
}

function renderStages(r) {
  const stages = document.getElementById("stages");
  const body = stages.querySelector("tbody");
  body.replaceChildren();
  stages.hidden = !r.stages;
  for (const stage of r.stages || []) {
    const tr = el("tr");
    tr.append(el("td", String(stage.stage)), el("td", String(stage.layers), "num"),
      el("td", gib(stage.peak_bytes), "num"), el("td", stage.peak_phase));
    body.append(tr);
  }
}

function renderComparison(c) {
  const box = document.getElementById("comparison");
  box.hidden = !c;
  if (!c) return;
  document.getElementById("compare-what").textContent =
    c.mode === "serving" ? "the same model, the other workload" : "fp32 with no memory savers";
  const message = document.getElementById("compare-message");
  message.textContent = `${c.message} Baseline: ${gib(c.baseline_total_bytes)} GiB, this: ${gib(c.total_bytes)} GiB.`;
  message.classList.toggle("negative", c.saving < 0);
  const body = document.querySelector("#compare-table tbody");
  body.replaceChildren();
  const signed = (bytes) => `${bytes > 0 ? "+" : bytes < 0 ? "−" : ""}${gib(Math.abs(bytes))}`;
  for (const row of c.components) {
    const tr = el("tr");
    tr.append(el("td", row.component.replaceAll("_", " ")), el("td", gib(row.bytes), "num"),
      el("td", gib(row.baseline_bytes), "num"), el("td", signed(row.difference_bytes), "num"));
    body.append(tr);
  }
  const total = el("tr", undefined, "total-row");
  total.append(el("td", "Total per GPU"), el("td", gib(c.total_bytes), "num"), el("td", gib(c.baseline_total_bytes), "num"),
    el("td", signed(c.total_bytes - c.baseline_total_bytes), "num"));
  body.append(total);
  if (c.gpus_needed !== undefined) {
    const tr = el("tr");
    tr.append(el("td", "GPUs needed"), el("td", String(c.gpus_needed ?? "none fit"), "num"),
      el("td", String(c.baseline_gpus_needed ?? "none fit"), "num"), el("td", ""));
    body.append(tr);
  }
  if (c.cost_usd !== null && c.cost_usd !== undefined) {
    const tr = el("tr");
    const dollars = (x) => (x === null || x === undefined ? "—" : `$${Math.round(x).toLocaleString("en-US")}`);
    tr.append(el("td", "Training cost"), el("td", dollars(c.cost_usd), "num"), el("td", dollars(c.baseline_cost_usd), "num"), el("td", ""));
    body.append(tr);
  }
}

// The answers re-run the estimate dozens of times: they follow the breakdown once typing pauses.
let answersTimer = null;

function scheduleAnswers() {
  clearTimeout(answersTimer);
  document.documentElement.dataset.answersPending = "1";
  answersTimer = setTimeout(() => {
    const payload = JSON.parse(window.pycoreAnswers(requestQuery()));
    if (payload.answers) {
      renderAnswers(payload.answers, lastResult);
      renderComparison(payload.answers.comparison);
    }
    const baseErrors = Object.entries(payload.errors).filter(([key]) => key.startsWith("base."));
    for (const [, message] of baseErrors) document.getElementById("messages").append(el("p", message));
    delete document.documentElement.dataset.answersPending;
  }, 120);
}

let lastResult = null;

function update(historyMode) {
  if (historyMode) scheduleUrl(historyMode);
  else document.getElementById("link-field").value = location.href;
  if (!run) return;
  const payload = JSON.parse(run(requestQuery()));
  lastResult = payload.result;
  render(payload);
  if (window.__firstResultMs === undefined) window.__firstResultMs = performance.now();
  if (payload.result) scheduleAnswers();
}

form.addEventListener("input", (event) => {
  if (event.target.dataset.pending !== undefined) delete event.target.dataset.pending;
  update(pushNext ? "push" : "replace");
  pushNext = false;
});
form.addEventListener("change", () => {
  if (urlMode !== null) writeUrl();       // one history entry per edited field
  pushNext = true;
});
window.addEventListener("popstate", () => { fillForm(location.search); update(null); });

document.getElementById("copy-link").addEventListener("click", async () => {
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

// config.json import: pycore reads it; the page only moves text around.
const importStatus = document.getElementById("import-status");

function importConfig(text, origin) {
  const answer = JSON.parse(window.pycoreImport(text));
  if (answer.error) {
    importStatus.textContent = `${origin}: ${answer.error}`;
    importStatus.className = "import-status failed";
    return;
  }
  const params = new URLSearchParams(formQuery());
  for (const el of form.querySelectorAll('[data-field] [data-key]')) {
    if (el.closest('fieldset[data-group="model"]')) params.delete(el.dataset.key);
  }
  for (const [key, value] of answer.query) params.set(key, value);
  fillForm(params.toString());
  importStatus.textContent = `${origin}: ${answer.message}`;
  importStatus.className = "import-status";
  update("push");
  pushNext = true;
}

document.getElementById("import-apply").addEventListener("click", () =>
  importConfig(document.getElementById("import-text").value, "Pasted config.json"));
document.getElementById("import-file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (file) importConfig(await file.text(), file.name.slice(0, 80));
});
document.getElementById("import-fetch").addEventListener("click", async () => {
  const id = document.getElementById("import-hub").value.trim();
  if (!/^[A-Za-z0-9][\w.-]*\/[\w.-]+$/.test(id)) {
    importStatus.textContent = "Hub id: expected owner/name, such as meta-llama/Llama-3.1-8B.";
    importStatus.className = "import-status failed";
    return;
  }
  importStatus.textContent = `Fetching ${id} from the Hugging Face hub…`;
  importStatus.className = "import-status";
  let response;
  try {
    response = await fetch(`https://huggingface.co/${id}/resolve/main/config.json`);
  } catch {
    response = null;
  }
  if (!response || !response.ok) {
    const why = !response ? "no answer (offline, or blocked)" :
      response.status === 401 || response.status === 403 ? `status ${response.status}: a gated or private model` :
      `status ${response.status}`;
    importStatus.textContent = `The hub refused ${id} (${why}). Download its config.json where you are signed in, then paste it or choose the file.`;
    importStatus.className = "import-status failed";
    return;
  }
  importConfig(await response.text(), id);
});

function ready() {
  if (run || !window.pycoreRun) return;
  run = window.pycoreRun;
  for (const control of [...fields(), ...document.querySelectorAll(".actions button, #import textarea, #import input, #import button")]) {
    control.disabled = false;
  }
  statusLine.textContent = "Ready. Results update as you type.";
  update(null);
}

function failed(reason) {
  if (run) return;
  statusLine.textContent = `Python could not start in this browser, so no estimate can be shown (${reason}). ` +
    "Try a current Chrome, Firefox or Safari, or run python -m pycore locally.";
  statusLine.classList.add("failed");
}

window.addEventListener("error", (event) => failed(event.message || "script error"));
window.addEventListener("unhandledrejection", (event) => failed(String(event.reason).slice(0, 200)));
window.addEventListener("pycore-ready", ready);
setTimeout(() => failed("it did not finish loading within 90 seconds"), 90000);

// startup.js paints the answer build.py computed with pycore, before Python is ready.
window.pycorePaint = (payload, answers) => {
  render(payload);
  if (payload.result && answers?.answers) { renderAnswers(answers.answers, payload.result); renderComparison(answers.answers.comparison); }
};

fillForm(location.search);
document.getElementById("link-field").value = location.href;
ready();
