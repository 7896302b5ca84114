"""Build the static site into dist/, or build it and serve it on localhost.

Usage:
    python build.py               # writes dist/ (runs `npm ci` first if node_modules is missing or stale)
    python build.py serve [PORT]  # builds, then serves dist/ on http://127.0.0.1:PORT (default 8000)
    python build.py serve-only PORT DIR   # serves an already built folder (the browser tests use it)

Standard library only at run time, plus these subprocesses, any failure of which fails the build:
  * `npm ci` against the committed package.json and package-lock.json, which pin Pyodide, PyScript and uPlot (the charts) once;
  * `python -m pip wheel --no-deps .`: pycore reaches the browser as the very wheel `pip install .`
    installs, which PyScript's `packages` setting hands to micropip;
  * `python -m pip download micropip==0.11.1` (from PyPI, once; kept in build/downloads/): the npm
    package of Pyodide does not ship the micropip wheel its lock names. The download must have the
    sha256 pinned below (MICROPIP_SHA256), else the build fails;
  * `node tools/pyodide_build.mjs` (Pyodide's own Python, from node_modules): byte-compiles that
    micropip wheel as Pyodide does its own (importing micropip from source costs seconds in the
    browser), and takes the memory snapshot. The site serves its own pyodide-lock.json, which pins the
    compiled wheel's sha256.

The output is deterministic (sorted entries, fixed timestamps, SOURCE_DATE_EPOCH for the wheel) and
self-contained: any static file server, GitHub Pages included, can serve it with no CDN. It also holds
the default estimate computed here by pycore (painted before Python starts), one such file per preset
in prerendered/, and a service worker whose cache is named by the hash of everything else in dist/.
"""

import gzip
import hashlib
import html
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent
DIST = ROOT / "dist"
SITE = ROOT / "site"
MODULES = ROOT / "node_modules"
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
MICROPIP = "micropip-0.11.1-py3-none-any.whl"      # the version Pyodide 314.0.7's lock pins
MICROPIP_SHA256 = "768de165adb8e66906039d8fec4127a57f522dfdf8e6fbff877a4616941ecfd3"  # PyPI's file
DOWNLOADS = ROOT / "build" / "downloads"
SOURCE_DATE_EPOCH = "315532800"                     # 1980-01-01, the earliest time a zip can hold
# The service worker caches every file as it installs but these, which the page loads only on demand
# (the code editor and terminal PyScript can show, per-preset estimates): cached when first asked for.
PRECACHE_SKIP = ("pyscript/codemirror", "pyscript/xterm", "prerendered/", "validation.md", ".nojekyll")

sys.path.insert(0, str(ROOT))
from pycore.base.units import TIB_FROM_BYTES  # noqa: E402
from pycore.inputs import applies, schema  # noqa: E402
from pycore.model import catalog  # noqa: E402
from pycore.model.architecture import ARCH_FIELDS as ARCH_KEYS  # noqa: E402
from pycore.output import report  # noqa: E402


def fail(message):
    sys.exit(f"build.py: {message}")


def npm_ci():
    lock = ROOT / "package-lock.json"
    installed = MODULES / ".package-lock.json"
    if installed.is_file() and installed.stat().st_mtime >= lock.stat().st_mtime:
        return
    if shutil.which("npm") is None:
        fail("npm not found: install Node.js 20+ (it brings npm)")
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=ROOT, check=True)


def version(package):
    return json.loads((MODULES / package / "package.json").read_text())["version"]


def _options(choices, default, blank=None):
    rows = [f'<option value="">{html.escape(blank)}</option>'] if blank is not None else []
    for choice in choices:
        selected = " selected" if choice == default else ""
        rows.append(f'<option value="{html.escape(choice)}"{selected}>{html.escape(choice)}</option>')
    return "".join(rows)


def field_html(field):
    """One labelled form control for a schema field, disabled until Python is ready."""
    key = html.escape(field.key)
    label = html.escape(schema.LABELS[field.key])
    hint = html.escape(field.meaning)
    unit = f'<span class="unit">{html.escape(field.unit)}</span>' if field.unit else ""
    # An input whose default is read from a catalog (the price) shows that number and, under it, its source:
    # pycore's words for the default inputs here, each estimate's own once drawn (web.run's field_defaults).
    catalog = FIELD_DEFAULTS.get(field.key)
    used = f'<p class="hint used" id="d-{key}">{html.escape(catalog["text"])}</p>' if catalog else ""
    described = f"h-{key} d-{key} e-{key}" if catalog else f"h-{key} e-{key}"
    common = f'id="f-{key}" name="{key}" data-key="{key}" disabled aria-describedby="{described}"'
    if field.kind == "choice":
        blank = "preset value" if field.default is None else None
        control = f"<select {common}>{_options(field.choices, field.default, blank)}</select>"
    elif field.kind == "dtype":
        control = f"<select {common}>{_options(field.choices, None, 'from policy')}</select>"
    else:
        default = "" if field.default is None else schema.format_value(field, field.default)
        shown = catalog["placeholder"] if catalog else default or "preset value"
        # The model field is a combobox over the presets (site/picker.js); the GPU field suggests from a datalist.
        listing = {"model": ' role="combobox" aria-autocomplete="list" aria-expanded="false" aria-controls="model-picker"',
                   "gpu": ' list="gpu-list"'}.get(field.key, "")
        mode = ' inputmode="numeric"' if field.kind in ("int",) else ""
        control = (f'<input type="text" {common} value="{html.escape(default)}" '
                   f'placeholder="{html.escape(shown)}"{listing}{mode} autocomplete="off" '
                   f'spellcheck="false">')
    only = ' data-transformer=""' if field.key in applies.TRANSFORMER_ONLY else ""
    # Each control is a form of its own. At every keystroke Chromium's autofill (FormTracker's
    # FormControlDidChange task) re-reads every field of the edited field's form: 6-7 ms of the main thread
    # per key with the 68 fields in one form, 0.65 ms alone (a Chromium trace of 40 keys on this machine).
    error = f'<p class="error" id="e-{key}" role="alert"></p>'
    # The model field's error line (with its "Did you mean" or hub button) sits above the picker's list, so the
    # list closing as the field loses focus never moves the button being clicked.
    after = f"{error}{PICKER}<p class=\"hint\" id=\"h-{key}\">{hint}</p>{used}" if field.key == "model" \
        else f'<p class="hint" id="h-{key}">{hint}</p>{used}{error}'
    return (f'<div class="field" data-field="{key}"{only}><label for="f-{key}">{label}</label>'
            f'<form class="control" autocomplete="off">{control}{unit}</form>{after}</div>')


# config=: an imported config.json no preset with overrides expresses, carried by the link as its own text
# (pycore.model.config_import); shown only while it holds one (data-only-given, site/app.js showApplies).
CONFIG_FIELD = ('<div class="field carried" data-field="config" data-only-given="" hidden>'
                '<label for="f-config">Imported config.json</label>'
                '<form class="control" autocomplete="off"><input type="hidden" id="f-config" name="config" '
                'data-key="config" disabled></form>'
                '<p class="hint" id="h-config">The model is the config.json imported above: no preset with overrides '
                'expresses it, so the link carries its text. Type or pick another model to leave it.</p>'
                '<p class="error" id="e-config" role="alert"></p></div>')

# The model picker's list (site/picker.js fills it from the model table form_html writes).
PICKER = '<ul id="model-picker" class="picker" role="listbox" aria-label="Model presets" hidden></ul>'


FIELD_DEFAULTS = report.field_defaults(schema.DEFAULTS)

# Fields most people leave alone, folded under a summary line (opened when the URL sets one of them).
FOLDED = {"model": ("Architecture overrides", set(ARCH_KEYS)),
          "precision": ("Per-pool dtypes", {"weight_dtype", "grad_dtype", "master_dtype", "opt_dtype",
                                            "act_dtype", "kv_dtype"}),
          # Python's words for one GPU; app.js draws each estimate's own (web.run's parallel_heading).
          "parallel": (report.SINGLE_GPU, {f.key for f in schema.FIELDS if f.group == "parallel"})}


IMPORT_PANEL = """<details class="more import" id="import"><summary>Import a Hugging Face config.json</summary>
<p class="hint">Paste it, choose the file, or fetch it from the hub by id. The architecture goes into the link.</p>
<textarea id="import-text" rows="4" placeholder='{"model_type": "llama", "num_hidden_layers": 32, ...}' disabled></textarea>
<div class="control"><input type="file" id="import-file" accept=".json,application/json" disabled></div>
<div class="control"><input type="text" id="import-hub" placeholder="meta-llama/Llama-3.1-8B" disabled
  aria-label="Hugging Face model id"><button type="button" id="import-fetch" disabled>Fetch</button></div>
<div class="control"><button type="button" id="import-apply" disabled>Import pasted text</button></div>
<p class="import-status" id="import-status" role="status"></p></details>"""


# Read the checkpoint (site/checkpoint.js): only each file's header bytes are read, through Blob.slice.
CHECKPOINT_PANEL = """<details class="more import" id="checkpoint"><summary>Read the checkpoint's headers</summary>
<p class="hint">Choose the .safetensors files (every shard, with model.safetensors.index.json) or a .gguf file. Only each
file's header is read, in this page; the weights' exact bytes then replace the estimate from parameters (weight_bytes).</p>
<div class="control"><input type="file" id="checkpoint-files" multiple accept=".safetensors,.gguf,.json"
  aria-label="Checkpoint files" disabled></div>
<div class="control"><input type="text" id="checkpoint-hub" placeholder="meta-llama/Llama-3.1-8B" disabled
  aria-label="Hugging Face model id whose checkpoint headers to read" autocomplete="off" spellcheck="false"><button
  type="button" id="checkpoint-fetch" disabled>Read from the hub</button></div>
<p class="hint">From the hub: model.safetensors.index.json, then only each shard's header, by HTTP range requests to
huggingface.co, when you click.</p>
<p class="import-status" id="checkpoint-status" role="status"></p>
<table id="checkpoint-table" class="checkpoint-table" hidden><thead><tr><th>Weights</th><th class="num">Bytes</th>
<th class="num">GiB</th></tr></thead><tbody></tbody></table>
<ul id="checkpoint-notes" class="note" hidden></ul></details>"""


def form_html():
    groups = []
    for group, title in schema.GROUPS:
        members = [f for f in schema.FIELDS if f.group == group and f.key != "config"]
        summary, folded = FOLDED.get(group, ("", set()))
        shown = "".join(field_html(f) for f in members if f.key not in folded)
        hidden = "".join(field_html(f) for f in members if f.key in folded)
        if hidden:
            shown += (f'<details class="more" data-folded="{group}"><summary>{html.escape(summary)}</summary>'
                      f'{hidden}</details>')
        if group == "model":
            shown += CONFIG_FIELD + IMPORT_PANEL + CHECKPOINT_PANEL
        groups.append(f'<fieldset class="group" data-group="{group}"><legend>{html.escape(title)}</legend>'
                      f"{shown}</fieldset>")
    # Two fixed columns (not CSS multi-column), so opening a folded section never moves a fieldset
    # from one column to the other.
    half = (len(groups) + 1) // 2
    columns = f'<div class="column">{"".join(groups[:half])}</div><div class="column">{"".join(groups[half:])}</div>'
    # The model picker's entries, worded by pycore (report.model_choices), as data the page reads.
    models = script_json(report.model_choices())
    gpus = "".join(f'<option value="{html.escape(g)}">{html.escape(e["name"])}</option>'
                   for g, e in catalog.gpus().items())
    # Which inputs apply when (pycore/inputs/applies.py), as data the page reads: CSP-safe, never executed.
    table = json.dumps(applies.APPLIES, sort_keys=True).replace("<", "\\u003c")
    # Where sizes switch to TiB (pycore/base/units.py), for the few sizes the page words itself.
    units = json.dumps({"tib_from_bytes": TIB_FROM_BYTES})
    return (columns + f'<script type="application/json" id="model-table">{models}</script><datalist id="gpu-list">{gpus}</datalist>'
            f'<script type="application/json" id="applies-table">{table}</script>'
            f'<script type="application/json" id="units-table">{units}</script>')


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pip(*args, cwd=ROOT):
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    environment = {**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
    done = subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"{' '.join(command[2:])} failed (status {done.returncode}):\n{done.stdout}{done.stderr}")


def pycore_wheel(target_dir):
    """Build the same wheel `pip install .` installs into target_dir; returns its file name."""
    with tempfile.TemporaryDirectory() as scratch:
        pip("wheel", "--no-deps", "--quiet", "--wheel-dir", scratch, str(ROOT))
        wheels = sorted(Path(scratch).glob("*.whl"))
        if len(wheels) != 1:
            fail(f"pip wheel made {[w.name for w in wheels]}, expected one wheel")
        shutil.copy2(wheels[0], target_dir / wheels[0].name)
        return wheels[0].name


def micropip_wheel():
    """PyPI's micropip wheel, downloaded once into build/downloads/ and checked against its pinned hash."""
    wheel = DOWNLOADS / MICROPIP
    if not wheel.is_file():
        DOWNLOADS.mkdir(parents=True, exist_ok=True)
        name, version = MICROPIP.split("-")[:2]
        # --python-version: micropip 0.11 requires Python >= 3.13, which Pyodide has and this need not.
        pip("download", "--no-deps", "--only-binary=:all:", "--python-version", "3.13", "--quiet",
            "--dest", str(DOWNLOADS), f"{name}=={version}")
    if sha256(wheel) != MICROPIP_SHA256:
        fail(f"{wheel} has sha256 {sha256(wheel)}, expected {MICROPIP_SHA256}: delete it and rebuild, "
             "or pin the new hash if PyPI's file really changed")
    return wheel


def node(*args):
    if shutil.which("node") is None:
        fail("node not found: install Node.js 20+")
    done = subprocess.run(["node", str(ROOT / "tools" / "pyodide_build.mjs"), *map(str, args)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"node tools/pyodide_build.mjs {' '.join(map(str, args))} failed (status {done.returncode}):\n"
             f"{done.stderr[-3000:]}")


def pyodide_lock(target, micropip):
    """Pyodide's lock reduced to the one package this site serves, micropip, pinned to our wheel of it.

    The other packages' wheels are not in dist/, so their entries could only ever fail to load."""
    lock = json.loads((MODULES / "pyodide" / "pyodide-lock.json").read_text())
    entry = lock["packages"]["micropip"]
    if entry["file_name"] != MICROPIP:
        fail(f"Pyodide's lock names {entry['file_name']}, build.py pins {MICROPIP}: update MICROPIP")
    lock["packages"] = {"micropip": {**entry, "sha256": sha256(micropip)}}
    target.write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")


def memory_snapshot(wheel, target):
    """Pyodide's memory once pycore is imported, gzipped (31 MiB raw, about 6 MiB compressed)."""
    with tempfile.TemporaryDirectory() as scratch:
        raw = Path(scratch) / "snapshot.bin"
        node("snapshot", wheel, raw)
        with open(target, "wb") as out, gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as packed:
            packed.write(raw.read_bytes())


def script_json(data):
    """JSON that is safe inside <script type="application/json"> (no "</script>" can close it)."""
    text = json.dumps(data, separators=(",", ":"), sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def prerendered(query):
    """What the page shows for a query before Python is ready: pycore's own answers, computed here."""
    from pycore.output import web

    answers = json.loads(web.answers(query))
    del answers["formulas"]                 # the run payload carries them already
    return {"query": query, "run": json.loads(web.run(query)), "answers": answers}


def write_prerendered(target_dir):
    """One file per preset model: the estimate for a link that sets only model=ID."""
    target_dir.mkdir()
    for model in catalog.models():
        text = json.dumps(prerendered(f"model={model}"), separators=(",", ":"), sort_keys=True)
        (target_dir / f"{model}.json").write_text(text)


def chart_library(target):
    """uPlot's minified build as an ES module the page imports when it first draws a chart, its CSS and licence."""
    source = MODULES / "uplot"
    target.mkdir()
    script = (source / "dist" / "uPlot.iife.min.js").read_text()
    if not script.lstrip().startswith("/*! https://github.com/leeoniya/uPlot") or "var uPlot=" not in script:
        fail("node_modules/uplot/dist/uPlot.iife.min.js is not the uPlot build this wraps: run npm ci")
    (target / "uPlot.mjs").write_text(script + "\nexport default uPlot;\n")
    shutil.copy2(source / "dist" / "uPlot.min.css", target / "uPlot.min.css")
    shutil.copy2(source / "LICENSE", target / "LICENSE")


def content_hash(directory, extra=b""):
    """sha256 over every file's path and bytes, sorted, and extra: it names the service worker's cache."""
    digest = hashlib.sha256(extra)
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and p.name != "sw.js"):
        digest.update(path.relative_to(directory).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def service_worker(directory):
    """site/sw.js with the build's hash and the files to cache on install written into it."""
    files = sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())
    files = [name for name in files if name != "sw.js"]
    precache = ["./"] + [f"./{name}" for name in files
                         if name != "index.html" and not name.startswith(PRECACHE_SKIP)]
    text = (SITE / "sw.js").read_text()
    for marker, value in (("{{BUILD_HASH}}", json.dumps(content_hash(directory, text.encode()))),
                          ("{{PRECACHE}}", json.dumps(precache, indent=1))):
        if marker not in text:
            fail(f"site/sw.js lacks {marker}")
        text = text.replace(marker, value)
    (directory / "sw.js").write_text(text)


def accuracy_html():
    """The validation summary the page states, from validation/measured.json (docs/validation.md)."""
    sys.path.insert(0, str(ROOT / "validation"))
    import compare

    s = compare.summary(compare.rows()[1])
    record, gpu = compare.cuda_rows()
    gpu_median = statistics.median(abs(r["error"]) for r in gpu)
    return (f"Checked against {s['cases']} real PyTorch steps measured with MemTracker: median error "
            f"{100 * s['median']:.1f}%, worst {100 * s['training_worst']:.1f}% for training and "
            f"{100 * s['serving_worst']:.1f}% for serving; and {len(gpu)} steps and generate() calls on an "
            f"{record['gpu']}: {100 * gpu_median:.1f}% median against max_memory_allocated. The usual textbook sum "
            f"is off by {100 * s['textbook_median']:.0f}% in the median case.")


def build():
    npm_ci()
    if DIST.exists():
        shutil.rmtree(DIST)
    DIST.mkdir()
    for path in sorted(SITE.iterdir()):
        if path.name in ("index.html", "sw.js", "pyscript.json", "pyodide-start.mjs"):
            continue
        shutil.copy2(path, DIST / path.name)
    pyodide, pyscript = DIST / "pyodide", DIST / "pyscript"
    pyodide.mkdir()
    for name in PYODIDE_FILES:
        source = MODULES / "pyodide" / name
        if not source.is_file():
            fail(f"{source} missing: run npm ci")
        if name != "pyodide-lock.json":
            shutil.copy2(source, pyodide / name)
    shutil.copy2(SITE / "pyodide-start.mjs", pyodide / "start.mjs")
    node("compile", micropip_wheel(), pyodide / MICROPIP)
    pyodide_lock(pyodide / "pyodide-lock.json", pyodide / MICROPIP)
    shutil.copytree(MODULES / "@pyscript" / "core" / "dist", pyscript,
                    ignore=shutil.ignore_patterns("*.map"))
    chart_library(DIST / "uplot")
    wheel = pycore_wheel(DIST)
    config = json.loads((SITE / "pyscript.json").read_text())
    config["packages"] = [f"./{wheel}"]
    (DIST / "pyscript.json").write_text(json.dumps(config, indent=1) + "\n")
    write_prerendered(DIST / "prerendered")
    memory_snapshot(DIST / wheel, pyodide / "snapshot.bin.gz")
    page = (SITE / "index.html").read_text()
    shutil.copy2(ROOT / "docs" / "validation.md", DIST / "validation.md")
    for marker, text in (("{{FORM}}", form_html()), ("{{ACCURACY}}", html.escape(accuracy_html())),
                         ("{{PYODIDE_VERSION}}", version("pyodide")),
                         ("{{PRERENDERED}}", script_json(prerendered(""))),
                         ("{{PYSCRIPT_VERSION}}", version("@pyscript/core"))):
        if marker not in page:
            fail(f"site/index.html lacks {marker}")
        page = page.replace(marker, text)
    (DIST / "index.html").write_text(page)
    (DIST / ".nojekyll").write_text("")
    service_worker(DIST)
    total = sum(p.stat().st_size for p in DIST.rglob("*") if p.is_file())
    print(f"built {DIST.relative_to(ROOT)}/ ({total / 2**20:.1f} MiB; Pyodide {version('pyodide')}, "
          f"PyScript {version('@pyscript/core')})")


class Handler(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".mjs": "text/javascript",
                      ".wasm": "application/wasm", ".js": "text/javascript"}

    def log_message(self, *args):
        pass


def serve(port, directory=DIST):
    server = ThreadingHTTPServer(("127.0.0.1", port), partial(Handler, directory=str(directory)))
    print(f"serving http://127.0.0.1:{server.server_port}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


def main(argv):
    if argv[:1] == ["serve"]:
        build()
        serve(int(argv[1]) if len(argv) > 1 else 8000)
    elif argv[:1] == ["serve-only"] and len(argv) == 3:
        serve(int(argv[1]), Path(argv[2]))
    elif not argv:
        build()
    else:
        fail(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
