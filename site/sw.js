// Service worker: the site works offline after one visit, and a new deploy is picked up on the next.
// build.py writes BUILD (a hash of every other file in dist/) and PRECACHE (what every visit loads).
// One cache per build: a new build is a new sw.js, so the browser installs it beside the old one;
// it fills its own cache, takes over, and deletes the old caches (startup.js then reloads the page once).

const BUILD = {{BUILD_HASH}};
const CACHE = `site-${BUILD}`;
const PRECACHE = {{PRECACHE}};

// The memory snapshot (6.6 MB) is left out where the browser asks to save data or reports a 2G/3G link,
// as pyodide-start.mjs leaves it out of a first visit: Python then starts without it, offline too.
function snapshotWorthFetching() {
  const link = self.navigator.connection;
  return !(link && (link.saveData || /(^|-)2g$|^3g$/.test(link.effectiveType || "")));
}

self.addEventListener("install", (event) => {
  const files = PRECACHE.filter((url) => !url.endsWith("snapshot.bin.gz") || snapshotWorthFetching());
  // cache: "no-cache" revalidates each file with the server (a 304 reuses the HTTP cache's copy, which
  // the first visit has just filled), so an old file is never stored under the new build's name.
  event.waitUntil(caches.open(CACHE)
    .then((cache) => cache.addAll(files.map((url) => new Request(url, { cache: "no-cache" }))))
    .then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(caches.keys()
    .then((keys) => Promise.all(keys.filter((key) => key.startsWith("site-") && key !== CACHE)
      .map((key) => caches.delete(key))))
    .then(() => self.clients.claim()));
});

// Cache first: every file of a build is fixed, so a cached copy is never stale under this build's name.
// A page URL with any query is the same index.html. What is not cached yet (a preset's estimate,
// PyScript's lazy chunks) is fetched once and kept.
self.addEventListener("fetch", (event) => {
  const request = event.request;
  const url = new URL(request.url);
  if (request.method !== "GET" || url.origin !== self.location.origin) return;
  const scope = new URL(self.registration.scope);
  const page = url.pathname === scope.pathname || url.pathname === `${scope.pathname}index.html`;
  event.respondWith((async () => {
    const cache = await caches.open(CACHE);
    const hit = page ? await cache.match(scope.href) : await cache.match(request);
    if (hit) return hit;
    if (request.cache === "only-if-cached") {
      // The snapshot left out on a slow link (install, above) is cached once the link allows: the page
      // starts without it this time, from it the next (or the one after, if this download fails).
      if (url.pathname.endsWith("snapshot.bin.gz") && snapshotWorthFetching()) {
        event.waitUntil(cache.add(url.href).catch(() => {}));
      }
      return new Response(null, { status: 504 });
    }
    const response = await fetch(request);
    if (response.status === 200 && response.type === "basic" && !page) await cache.put(request, response.clone());
    return response;
  })());
});
