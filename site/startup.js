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
  return new Promise((resolve) => requestAnimationFrame(() => {
    if (window.__firstPaintMs === undefined) window.__firstPaintMs = performance.now();
    root.dataset.prerendered = "painted";
    resolve();
  }));
}

function paint(prerendered) {
  if (ready() || typeof window.pycorePaint !== "function") return null;
  window.pycorePaint(prerendered.run, prerendered.answers);
  return painted();
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
    if (block) await paint(JSON.parse(block.textContent));
  } else if (source) {
    try {
      const response = await fetch(source);
      if (response.ok) await paint(await response.json());
    } catch {
      // No file for this model (a typo, an alias): Python will answer, and name a typo.
    }
  }
}

// Start-up stages: the bytes of Pyodide's two large files as they arrive, then PyScript's py:progress.
// Python starts on this thread, so the page cannot repaint while it boots: each label is set before
// the work it names.
const STAGES = ["Fetching Pyodide", "Starting Python", "Installing pycore"];
let progress = null;

function showProgress() {
  const box = document.createElement("div");
  box.className = "startup";
  box.id = "startup";
  const bar = document.createElement("progress");
  bar.max = 1;
  bar.value = 0;
  bar.setAttribute("aria-label", "Start-up progress");
  const label = document.createElement("span");
  label.className = "startup-stage";
  box.append(bar, " ", label);
  document.getElementById("status").after(box);
  progress = { box, bar, label, stage: -1 };
  stage(0);
}

function stage(index, detail = "") {
  if (!progress || index < progress.stage) return;
  progress.stage = index;
  progress.label.textContent = `Step ${index + 1} of ${STAGES.length}: ${STAGES[index]}${detail}…`;
  root.dataset.startupStage = STAGES[index];
}

function hideProgress() {
  if (progress) progress.box.remove();
  progress = null;
  delete root.dataset.startupStage;
}

// Pyodide fetches these with fetch(); the page passes each body through a counter.
const LARGE = /\/pyodide\/(pyodide\.asm\.wasm|python_stdlib\.zip)$/;
const downloads = new Map();

function counted(name, response) {
  if (!response.ok || !response.body) return response;
  const entry = { loaded: 0, total: Number(response.headers.get("content-length")) || 0, done: false };
  downloads.set(name, entry);
  const body = response.body.pipeThrough(new TransformStream({
    transform(chunk, controller) {
      entry.loaded += chunk.byteLength;
      controller.enqueue(chunk);
      showDownloads();
    },
    flush() {
      entry.done = true;
      showDownloads();
    },
  }));
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

function showDownloads() {
  const all = [...downloads.values()];
  const loaded = all.reduce((sum, d) => sum + d.loaded, 0);
  const total = all.reduce((sum, d) => sum + Math.max(d.total, d.loaded), 0);
  if (all.length === 2 && all.every((d) => d.done)) {
    if (progress) progress.bar.value = 1 / STAGES.length;
    stage(1);
  } else if (progress && progress.stage === 0 && total > 0) {
    progress.bar.value = loaded / total / STAGES.length;
    stage(0, ` (${(loaded / 2 ** 20).toFixed(1)} of ${(total / 2 ** 20).toFixed(1)} MiB)`);
  }
}

const pageFetch = window.fetch;
window.fetch = function fetch(input, init) {
  const answer = pageFetch.call(this, input, init);
  if (ready()) return answer;
  const url = new URL(input instanceof Request ? input.url : String(input), location.href);
  const large = LARGE.exec(url.pathname);
  return large && url.origin === location.origin ? answer.then((response) => counted(large[1], response)) : answer;
};

window.addEventListener("py:progress", (event) => {
  if (event.detail === "Loaded interpreter" && progress) {
    progress.bar.value = 2 / STAGES.length;
    stage(2);
  }
});

// Offline after the first visit. Registered once Python runs, so its downloads never compete with
// the first load. On later visits the browser checks sw.js as it navigates; a new build's worker takes
// over as soon as it has cached the new files, and the page reloads once to show the new build (the
// inputs are in the URL, so nothing is lost).
if ("serviceWorker" in navigator && navigator.serviceWorker.controller !== null) {
  navigator.serviceWorker.addEventListener("controllerchange", () => location.reload(), { once: true });
}

function registerServiceWorker() {
  if (!("serviceWorker" in navigator)) return;
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
  // Python starts (pyodide/start.mjs) once the build-time estimate is painted, not when PyScript has set
  // itself up, about a second later; PyScript then receives that interpreter.
  paintPrerendered().finally(() => import("./pyodide/start.mjs").catch(() => {}));
}
