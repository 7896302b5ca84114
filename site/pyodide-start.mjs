// PyScript's interpreter module (pyscript.json names it; build.py puts it beside pyodide.mjs): Pyodide's
// own loadPyodide, started from the memory snapshot build.py took with pycore imported, whenever the
// service worker already holds that snapshot (every visit after the first). Otherwise, or if the
// snapshot cannot be used, Python starts the ordinary way.
import { loadPyodide as loadPlain, version } from "./pyodide.mjs";

export { version };

const SNAPSHOT = new URL("./snapshot.bin.gz", import.meta.url).href;

async function cachedSnapshot() {
  if (!navigator.serviceWorker?.controller || !("DecompressionStream" in self)) return null;
  // only-if-cached: sw.js answers from this build's cache or says 504; it never downloads it here.
  const response = await fetch(SNAPSHOT, { cache: "only-if-cached", mode: "same-origin" });
  if (!response.ok) return null;
  const bytes = await new Response(response.body.pipeThrough(new DecompressionStream("gzip"))).arrayBuffer();
  return new Uint8Array(bytes);
}

export async function loadPyodide(options = {}) {
  const snapshot = await cachedSnapshot().catch(() => null);
  if (snapshot) {
    try {
      const pyodide = await loadPlain({ ...options, _loadSnapshot: snapshot });
      document.documentElement.dataset.snapshot = "used";
      return pyodide;
    } catch (error) {
      console.warn("Pyodide memory snapshot not usable, starting Python without it:", error);
    }
  }
  return loadPlain(options);
}
