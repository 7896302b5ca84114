// PyScript's interpreter module (pyscript.json names it; build.py puts it beside pyodide.mjs): Pyodide's
// own loadPyodide, started as soon as the page imports this module (startup.js does, once the
// build-time estimate is painted) instead of once PyScript has set itself up, about a second later on a
// 2-core machine. PyScript's call below receives this instance.
//
// Python starts from the memory snapshot build.py took with pycore imported (a first visit measured
// 0.67x a bare loadPyodide() page here, against 1.45x without it; README): from the service worker's
// cache on later visits, over the network on a first visit (6.6 MB more, skipped when the browser asks
// to save data or reports a 2G/3G link). If the snapshot cannot be had or used, Python starts the
// ordinary way.
import { loadPyodide as loadPlain, version } from "./pyodide.mjs";

export { version };

const SNAPSHOT = new URL("./snapshot.bin.gz", import.meta.url).href;
const output = { stdout: null, stderr: null };     // PyScript's own, once it asks for Python

// sw.js asks the same before caching the snapshot.
function snapshotWorthFetching() {
  const link = navigator.connection;
  return !(link && (link.saveData || /(^|-)2g$|^3g$/.test(link.effectiveType || "")));
}

async function snapshot() {
  if (!("DecompressionStream" in self)) return null;
  // With a service worker (later visits): only-if-cached, so sw.js answers from this build's cache or
  // says 504 and nothing is downloaded here. Without one (a first visit): the network.
  const cached = Boolean(navigator.serviceWorker?.controller);
  if (!cached && !snapshotWorthFetching()) return null;
  const response = await fetch(SNAPSHOT, cached ? { cache: "only-if-cached", mode: "same-origin" } : {});
  if (!response.ok) return null;
  const bytes = await new Response(response.body.pipeThrough(new DecompressionStream("gzip"))).arrayBuffer();
  return new Uint8Array(bytes);
}

async function start() {
  const options = {
    indexURL: new URL("./", import.meta.url).href,
    stdout: (text) => (output.stdout ? output.stdout(text) : console.log(text)),
    stderr: (text) => (output.stderr ? output.stderr(text) : console.warn(text)),
  };
  const memory = await snapshot().catch(() => null);
  if (memory) {
    try {
      const pyodide = await loadPlain({ ...options, _loadSnapshot: memory });
      document.documentElement.dataset.snapshot = "used";
      return pyodide;
    } catch (error) {
      console.warn("Pyodide memory snapshot not usable, starting Python without it:", error);
    }
  }
  return loadPlain(options);
}

const early = start();
early.catch(() => {});        // a failure is reported when PyScript asks (below), not as unhandled

export async function loadPyodide(options = {}) {
  output.stdout = options.stdout;
  output.stderr = options.stderr;
  const pyodide = await early;
  // On later visits PyScript passes the packages it installed before (pycore's wheel, by URL) instead of
  // installing them with micropip: loaded here as loadPyodide({packages}) would.
  if (options.packages?.length) await pyodide.loadPackage(options.packages);
  return pyodide;
}
