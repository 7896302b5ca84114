"""Loading the built page: pycore's wheel through micropip, numbers before Python, offline, new deploys."""

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from conftest import READY_MS, launch, serving

from pycore.output import web

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.browser


def load_build_module():
    spec = importlib.util.spec_from_file_location("site_build", ROOT / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpython_total(query):
    return json.loads(web.run(query))["result"]["total_bytes"]


def hold_pyodide(context):
    """Python never starts: Pyodide's WebAssembly is requested and never answered."""
    held = []
    context.route("**/pyodide.asm.wasm", lambda route: held.append(route))
    return held


def test_served_lock_pins_the_served_micropip_and_pycore_is_the_projects_wheel(dist):
    lock = json.loads((dist / "pyodide" / "pyodide-lock.json").read_text())
    micropip = lock["packages"]["micropip"]
    served = (dist / "pyodide" / micropip["file_name"]).read_bytes()
    assert hashlib.sha256(served).hexdigest() == micropip["sha256"]
    config = json.loads((dist / "pyscript.json").read_text())
    assert "files" not in config
    [wheel] = config["packages"]
    assert wheel.startswith("./pycore_gpu_memory-") and wheel.endswith("-py3-none-any.whl")
    assert (dist / wheel).is_file() and not (dist / "pycore.zip").exists()


def test_page_installs_pycore_wheel_with_micropip(watched, base_url):
    requested = []
    watched.page.on("request", lambda request: requested.append(request.url.removeprefix(base_url)))
    page = watched.open(base_url)
    assert int(page.evaluate("document.documentElement.dataset.totalBytes")) == cpython_total("")
    assert "pyodide/micropip-0.11.1-py3-none-any.whl" in requested
    assert any(url.startswith("pycore_gpu_memory-") and url.endswith(".whl") for url in requested)
    assert watched.errors == [] and watched.outside == []


def test_default_estimate_is_painted_before_python_computes_one(browser, base_url):
    # How soon it is painted is a figure benchmarks/page_speed.py prints (docs/speed.md), not a test.
    context = browser.new_context()      # no request routing, which would slow every request down
    try:
        page = context.new_page()
        page.goto(base_url)
        page.wait_for_selector("html.py-ready", timeout=READY_MS)
        painted, computed = page.evaluate("[window.__firstPaintMs, window.__firstResultMs]")
        assert painted < computed
    finally:
        context.close()


def test_default_estimate_is_shown_while_python_starts(watched, base_url):
    hold_pyodide(watched.context)
    page = watched.page
    page.goto(base_url)
    page.wait_for_function("document.documentElement.dataset.prerendered === 'painted'")
    assert int(page.evaluate("document.documentElement.dataset.totalBytes")) == cpython_total("")
    assert page.locator("#breakdown tbody tr").count() > 3
    assert page.locator("#answers dt").count() > 0
    assert not page.evaluate("document.documentElement.classList.contains('py-ready')")
    assert page.locator("#f-batch").is_disabled()
    assert page.locator("#startup progress").is_visible()
    assert "Fetching Pyodide" in page.locator("#startup").inner_text()


def test_preset_link_paints_that_presets_build_time_estimate(watched, base_url):
    hold_pyodide(watched.context)
    page = watched.page
    page.goto(base_url + "?model=gpt2")
    page.wait_for_function("document.documentElement.dataset.prerendered === 'painted'")
    assert int(page.evaluate("document.documentElement.dataset.totalBytes")) == cpython_total("model=gpt2")
    assert page.locator("#f-model").input_value() == "gpt2"


def test_other_inputs_restore_the_form_at_once_and_show_progress_until_python(watched, base_url):
    held = hold_pyodide(watched.context)
    page = watched.page
    page.add_init_script("""window.__stages = [];
        new MutationObserver(() => { const s = document.documentElement.dataset.startupStage;
            if (s && window.__stages.at(-1) !== s) window.__stages.push(s); })
          .observe(document, { attributes: true, subtree: true, attributeFilter: ['data-startup-stage'] });""")
    page.goto(base_url + "?model=gpt2&batch=16&recompute=full")
    page.wait_for_selector("#startup progress")
    assert page.locator("#f-batch").input_value() == "16"
    assert page.locator("#f-recompute").input_value() == "full"
    # No number but Python's for these inputs: the total holds no text, and its stylesheet shows a dash.
    assert page.locator("#total-gib").inner_text() == ""
    assert page.evaluate("getComputedStyle(document.getElementById('total-gib'), '::before').content") == '"—"'

    page.wait_for_function("window.__stages.length > 0 && document.querySelector('#startup') !== null")
    assert page.evaluate("window.__stages") == ["Fetching Pyodide"]
    # Let Python start: every stage shows in order, then the bar gives way to Python's number.
    watched.context.unroute("**/pyodide.asm.wasm")
    for route in held:
        route.continue_()
    page.wait_for_selector("html.py-ready", timeout=READY_MS)
    page.wait_for_function("document.documentElement.dataset.totalBytes !== undefined")
    assert page.evaluate("window.__stages") == ["Fetching Pyodide", "Starting Python", "Installing pycore"]
    assert page.locator("#startup").count() == 0
    assert int(page.evaluate("document.documentElement.dataset.totalBytes")) == \
        cpython_total("model=gpt2&batch=16&recompute=full")


def offline_ready(page):
    page.wait_for_function("document.documentElement.dataset.offline !== undefined", timeout=READY_MS)
    assert page.evaluate("document.documentElement.dataset.offline") == "ready"


def every_entry_point_answers(page):
    """The lazily imported modules are there after a start from the snapshot (it holds memory, not files)."""
    assert page.evaluate("JSON.parse(window.pycoreFits('gpu=rtx-4090&gpus=2&mode=infer')).rows.length") >= 20
    imported = page.evaluate("JSON.parse(window.pycoreImport(JSON.stringify({model_type: 'gpt2', n_layer: 2, "
                             "n_embd: 64, n_head: 4, vocab_size: 100, n_positions: 64})))")
    assert imported["params"] == 110592, imported       # 2 x 12 x 64^2 + 2 x 13 x 64 + 64 x (100 + 64) + 128
    assert page.evaluate("JSON.parse(window.pycoreAnswers('batch=2')).formulas.length") > 5
    assert page.evaluate("window.pycoreCsv('batch=2')").startswith("section,")


def test_works_offline_after_the_first_visit_starting_from_the_memory_snapshot(browser, base_url):
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(base_url + "?batch=4")
        page.wait_for_selector("html.py-ready", timeout=READY_MS)
        # A first visit fetches the snapshot too (pyodide/start.mjs) and PyScript's micropip installs pycore.
        assert page.evaluate("document.documentElement.dataset.snapshot") == "used"
        every_entry_point_answers(page)
        offline_ready(page)
        context.set_offline(True)
        page.reload()
        page.wait_for_selector("html.py-ready", timeout=READY_MS)
        page.wait_for_function("document.documentElement.dataset.totalBytes !== undefined")
        # Python started from the memory snapshot build.py took, with pycore already imported.
        assert page.evaluate("document.documentElement.dataset.snapshot") == "used"
        assert int(page.evaluate("document.documentElement.dataset.totalBytes")) == cpython_total("batch=4")
        every_entry_point_answers(page)
        page.locator("#f-batch").fill("8")
        page.wait_for_function(f"document.documentElement.dataset.totalBytes === '{cpython_total('batch=8')}'")
        assert page.evaluate("navigator.onLine") is False
    finally:
        context.close()


def started_without_the_snapshot(page, base_url):
    page.goto(base_url + "?batch=4")
    page.wait_for_selector("html.py-ready", timeout=READY_MS)
    page.wait_for_function("document.documentElement.dataset.totalBytes !== undefined")
    assert page.evaluate("document.documentElement.dataset.snapshot") is None
    assert int(page.evaluate("document.documentElement.dataset.totalBytes")) == cpython_total("batch=4")
    every_entry_point_answers(page)


def on_link(page, link):
    """Wait until Chromium reports the forced link type: it applies --force-effective-connection-type a
    moment after start (one CI run read '4g' on the first blank page)."""
    page.wait_for_function(f"navigator.connection.effectiveType === '{link.lower()}'")


@pytest.mark.parametrize("link", ["2G", "3G"])
def test_a_slow_link_never_downloads_the_snapshot_and_still_works_offline(playwright, base_url, link):
    # The snapshot is 6.6 MB more on a first visit: over a link Chromium reports as 2G or 3G, Python starts
    # the ordinary way (site/pyodide-start.mjs), the service worker caches the site without the snapshot
    # (site/sw.js), and the page still works offline from that cache.
    browser = launch(playwright, f"--force-effective-connection-type={link}")
    context = browser.new_context()
    requested = []
    context.on("request", lambda request: requested.append(request.url))
    try:
        page = context.new_page()
        on_link(page, link)
        started_without_the_snapshot(page, base_url)
        offline_ready(page)
        assert not [url for url in requested if "snapshot" in url]
        context.set_offline(True)
        page.reload()
        started_without_the_snapshot(page, base_url)
    finally:
        browser.close()


def test_after_a_first_visit_on_a_slow_link_a_fast_one_caches_the_snapshot_for_the_next(playwright, base_url,
                                                                                         tmp_path):
    # One browser profile, three visits: over 3G the site is cached without the snapshot; over 4G Python
    # still starts without it (only the offline cache is read) while the service worker caches it; the
    # third visit starts from it.
    opened = []

    def visit(link):
        for context in opened:
            context.close()
        opened[:] = [launch(playwright, f"--force-effective-connection-type={link}", profile=tmp_path / "profile")]
        page = opened[0].pages[0] if opened[0].pages else opened[0].new_page()
        on_link(page, link)
        page.goto(base_url + "?batch=4")
        page.wait_for_selector("html.py-ready", timeout=READY_MS)
        assert int(page.evaluate("document.documentElement.dataset.totalBytes")) == cpython_total("batch=4")
        return page

    try:
        offline_ready(visit("3G"))
        page = visit("4G")
        assert page.evaluate("document.documentElement.dataset.snapshot") is None
        # Each poll starts a look into the caches and reads what the previous one found (a polled
        # function's promise is not awaited).
        page.wait_for_function("""() => { (async () => { for (const key of await caches.keys())
            if (await (await caches.open(key)).match('pyodide/snapshot.bin.gz')) window.__snapshotCached = true; })();
            return window.__snapshotCached === true; }""", timeout=READY_MS)
        assert visit("4G").evaluate("document.documentElement.dataset.snapshot") == "used"
    finally:
        for context in opened:
            context.close()


def test_a_browser_asking_to_save_data_starts_python_without_the_snapshot(browser, base_url):
    # navigator.connection.saveData is set by the system (Android's Data Saver), not by a Chromium flag:
    # the page is told so here, before its scripts run (the service worker cannot be; it asks the same
    # question as the page, which the 2G/3G test above covers).
    context = browser.new_context()
    context.add_init_script("Object.defineProperty(Navigator.prototype, 'connection', "
                            "{ get: () => ({ saveData: true, effectiveType: '4g' }) });")
    requested = []           # by the page (the service worker, not told, still caches the snapshot)
    context.on("request", lambda request: request.service_worker or requested.append(request.url))
    try:
        page = context.new_page()
        started_without_the_snapshot(page, base_url)
        assert not [url for url in requested if "snapshot" in url]
    finally:
        context.close()


@pytest.fixture()
def deployed(dist, tmp_path):
    """A copy of the built site on its own server, which a test may redeploy in place."""
    site = tmp_path / "site"
    shutil.copytree(dist, site)
    with serving(site) as url:
        yield site, url


def test_a_new_deploy_is_picked_up_on_the_next_visit(browser, deployed):
    site, url = deployed
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(url)
        page.wait_for_selector("html.py-ready", timeout=READY_MS)
        offline_ready(page)
        old_caches = page.evaluate("caches.keys()")
        # Deploy a changed build: a new tagline, and the service worker build.py writes for it.
        index = site / "index.html"
        index.write_text(index.read_text().replace('<p class="tagline">', '<p class="tagline">Redeployed. ', 1))
        load_build_module().service_worker(site)
        page.reload()
        # The reload shows the cached build while the browser installs the new one; the page then
        # reloads itself once (a locator's wait spans that navigation).
        page.locator(".tagline", has_text="Redeployed.").wait_for(timeout=2 * READY_MS)
        page.wait_for_selector("html.py-ready", timeout=READY_MS)
        new_caches = page.evaluate("caches.keys()")
        assert len(old_caches) == 1 and len(new_caches) == 1 and new_caches != old_caches
    finally:
        context.close()
