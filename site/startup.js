// Before Python is ready: paint pycore's own answer computed at build time, show how far start-up has
// come, and, once Python runs, register the service worker that keeps the site for offline visits.
// No memory arithmetic here either: the numbers painted are pycore's JSON, written by build.py.
//
// Runs after app.js (module scripts run in document order), whose window.pycorePaint(run, answers)
// draws a web.run payload and a web.answers payload.

const root = document.documentElement;
const ready = () => root.classList.contains("py-ready");

function painted() {
  // The frame after this one has painted what was just drawn.
  requestAnimationFrame(() => {
    if (window.__firstPaintMs === undefined) window.__firstPaintMs = performance.now();
    root.dataset.prerendered = "painted";
  });
}

function paint(prerendered) {
  if (ready() || typeof window.pycorePaint !== "function") return;
  window.pycorePaint(prerendered.run, prerendered.answers);
  painted();
}

// Which build-time estimate matches this link: none (the default), or model=ID alone.
function prerenderedSource() {
  const params = [...new URLSearchParams(location.search)];
  if (params.length === 0) return "inline";
  if (params.length === 1 && params[0][0] === "model" && /^[a-z0-9][a-z0-9._-]*$/.test(params[0][1])) {
    return `./prerendered/${params[0][1]}.json`;
  }
  return null;
}

async function paintPrerendered() {
  const source = prerenderedSource();
  if (source === "inline") {
    const block = document.getElementById("prerendered");
    if (block) paint(JSON.parse(block.textContent));
  } else if (source) {
    try {
      const response = await fetch(source);
      if (response.ok) paint(await response.json());
    } catch {
      // No file for this model (a typo, an alias): Python will answer, and name a typo.
    }
  }
}

// Start-up stages, from PyScript's py:progress events and the resource timings of Pyodide's files.
const STAGES = ["Fetching Pyodide", "Starting Python", "Installing pycore"];
let progress = null;

function showProgress() {
  const box = document.createElement("div");
  box.className = "startup";
  box.id = "startup";
  const bar = document.createElement("progress");
  bar.max = STAGES.length;
  bar.value = 0;
  bar.setAttribute("aria-label", "Start-up progress");
  const label = document.createElement("span");
  label.className = "startup-stage";
  box.append(bar, " ", label);
  document.getElementById("status").after(box);
  progress = { box, bar, label, stage: -1 };
  stage(0);
}

function stage(index) {
  if (!progress || index <= progress.stage) return;
  progress.stage = index;
  progress.bar.value = index;
  progress.label.textContent = `Step ${index + 1} of ${STAGES.length}: ${STAGES[index]}…`;
  root.dataset.startupStage = STAGES[index];
}

function hideProgress() {
  if (progress) progress.box.remove();
  progress = null;
  delete root.dataset.startupStage;
}

const fetched = new Set();
if ("PerformanceObserver" in window) {
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const name = entry.name.split("?")[0];
      if (name.endsWith("/pyodide.asm.wasm") || name.endsWith("/python_stdlib.zip")) fetched.add(name);
    }
    if (fetched.size === 2) stage(1);
  }).observe({ type: "resource", buffered: true });
}

window.addEventListener("py:progress", (event) => {
  if (event.detail === "Loaded interpreter") stage(2);
});

// Offline after the first visit. Registered once Python runs, so its downloads never compete with
// the first load. A new build's worker takes over as soon as it has cached the new files; the page
// then reloads once to show the new build (the inputs are in the URL, so nothing is lost).
function registerServiceWorker() {
  if (!("serviceWorker" in navigator)) return;
  const updating = navigator.serviceWorker.controller !== null;
  let reloaded = false;
  navigator.serviceWorker.addEventListener("controllerchange", () => {
    if (updating && !reloaded) {
      reloaded = true;
      location.reload();
    }
  });
  navigator.serviceWorker.register("./sw.js")
    .then(() => navigator.serviceWorker.ready)
    .then(() => { root.dataset.offline = "ready"; })
    .catch((error) => { root.dataset.offline = `unavailable: ${error}`; });
}

function pythonReady() {
  hideProgress();
  registerServiceWorker();
}

if (ready()) {
  pythonReady();
} else {
  showProgress();
  window.addEventListener("pycore-ready", pythonReady, { once: true });
  // app.js says in words when Python cannot start; the bar would only contradict it.
  new MutationObserver((_, observer) => {
    if (document.getElementById("status").classList.contains("failed")) {
      hideProgress();
      observer.disconnect();
    }
  }).observe(document.getElementById("status"), { attributes: true, attributeFilter: ["class"] });
  paintPrerendered();
}
