"""Build the static site into dist/, or build it and serve it on localhost.

Usage:
    python build.py               # writes dist/ (runs `npm ci` first if node_modules is missing or stale)
    python build.py serve [PORT]  # builds, then serves dist/ on http://127.0.0.1:PORT (default 8000)
    python build.py serve-only PORT DIR   # serves an already built folder (the browser tests use it)

Standard library only, plus `npm ci` against the committed package.json and package-lock.json, which
pin Pyodide and PyScript once. The output is deterministic (sorted entries, fixed zip timestamps) and
self-contained: any static file server, GitHub Pages included, can serve it with no CDN.
"""

import html
import json
import shutil
import subprocess
import sys
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent
DIST = ROOT / "dist"
SITE = ROOT / "site"
MODULES = ROOT / "node_modules"
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
ZIP_DATE = (2020, 1, 1, 0, 0, 0)

sys.path.insert(0, str(ROOT))
from pycore import applies, catalog, schema  # noqa: E402
from pycore.architecture import ARCH_FIELDS as ARCH_KEYS  # noqa: E402


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
    common = f'id="f-{key}" name="{key}" data-key="{key}" disabled aria-describedby="h-{key} e-{key}"'
    if field.kind == "choice":
        blank = "preset value" if field.default is None else None
        control = f"<select {common}>{_options(field.choices, field.default, blank)}</select>"
    elif field.kind == "dtype":
        control = f"<select {common}>{_options(field.choices, None, 'from policy')}</select>"
    else:
        default = "" if field.default is None else schema.format_value(field, field.default)
        listing = {"model": ' list="model-list"', "gpu": ' list="gpu-list"'}.get(field.key, "")
        mode = ' inputmode="numeric"' if field.kind in ("int",) else ""
        control = (f'<input type="text" {common} value="{html.escape(default)}" '
                   f'placeholder="{html.escape(default or "preset value")}"{listing}{mode} autocomplete="off" '
                   f'spellcheck="false">')
    only = ' data-transformer=""' if field.key in applies.TRANSFORMER_ONLY else ""
    return (f'<div class="field" data-field="{key}"{only}><label for="f-{key}">{label}</label>'
            f'<div class="control">{control}{unit}</div>'
            f'<p class="hint" id="h-{key}">{hint}</p><p class="error" id="e-{key}" role="alert"></p></div>')


# Fields most people leave alone, folded under a summary line (opened when the URL sets one of them).
FOLDED = {"model": ("Architecture overrides", set(ARCH_KEYS)),
          "precision": ("Per-pool dtypes", {"weight_dtype", "grad_dtype", "master_dtype", "opt_dtype",
                                            "act_dtype", "kv_dtype"}),
          "parallel": ("Single GPU — open to shard across GPUs",
                       {f.key for f in schema.FIELDS if f.group == "parallel"})}


IMPORT_PANEL = """<details class="more import" id="import"><summary>Import a Hugging Face config.json</summary>
<p class="hint">Paste it, choose the file, or fetch it from the hub by id. The architecture goes into the link.</p>
<textarea id="import-text" rows="4" placeholder='{"model_type": "llama", "num_hidden_layers": 32, ...}' disabled></textarea>
<div class="control"><input type="file" id="import-file" accept=".json,application/json" disabled></div>
<div class="control"><input type="text" id="import-hub" placeholder="meta-llama/Llama-3.1-8B" disabled
  aria-label="Hugging Face model id"><button type="button" id="import-fetch" disabled>Fetch</button></div>
<div class="control"><button type="button" id="import-apply" disabled>Import pasted text</button></div>
<p class="import-status" id="import-status" role="status"></p></details>"""


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
            shown += IMPORT_PANEL
        groups.append(f'<fieldset class="group" data-group="{group}"><legend>{html.escape(title)}</legend>'
                      f"{shown}</fieldset>")
    # Two fixed columns (not CSS multi-column), so opening a folded section never moves a fieldset
    # from one column to the other.
    half = (len(groups) + 1) // 2
    columns = f'<div class="column">{"".join(groups[:half])}</div><div class="column">{"".join(groups[half:])}</div>'
    models = "".join(f'<option value="{html.escape(m)}">{html.escape(m)} · {e["params"] / 1e9:.2f}B</option>'
                     for m, e in catalog.models().items())
    gpus = "".join(f'<option value="{html.escape(g)}">{html.escape(e["name"])}</option>'
                   for g, e in catalog.gpus().items())
    # Which inputs apply when (pycore/applies.py), as data the page reads: CSP-safe, never executed.
    table = json.dumps(applies.APPLIES, sort_keys=True).replace("<", "\\u003c")
    return (columns + f'<datalist id="model-list">{models}</datalist><datalist id="gpu-list">{gpus}</datalist>'
            f'<script type="application/json" id="applies-table">{table}</script>')


def pycore_zip(target):
    """pycore/ and presets/ in one archive, unpacked by PyScript into the Python working directory."""
    files = sorted(p for p in (ROOT / "pycore").glob("*.py")) + sorted((ROOT / "presets").glob("*.json"))
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            info = zipfile.ZipInfo(str(path.relative_to(ROOT)), ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())


def accuracy_html():
    """The validation summary the page states, from validation/measured.json (docs/validation.md)."""
    sys.path.insert(0, str(ROOT / "validation"))
    import compare

    s = compare.summary(compare.rows()[1])
    return (f"Checked against {s['cases']} real PyTorch steps measured with MemTracker: median error "
            f"{100 * s['median']:.1f}%, worst {100 * s['training_worst']:.1f}% for training and "
            f"{100 * s['serving_worst']:.1f}% for serving; the usual textbook sum is off by "
            f"{100 * s['textbook_median']:.0f}% in the median case.")


def build():
    npm_ci()
    if DIST.exists():
        shutil.rmtree(DIST)
    DIST.mkdir()
    for path in sorted(SITE.iterdir()):
        if path.name == "index.html":
            continue
        shutil.copy2(path, DIST / path.name)
    pyodide, pyscript = DIST / "pyodide", DIST / "pyscript"
    pyodide.mkdir()
    for name in PYODIDE_FILES:
        source = MODULES / "pyodide" / name
        if not source.is_file():
            fail(f"{source} missing: run npm ci")
        shutil.copy2(source, pyodide / name)
    shutil.copytree(MODULES / "@pyscript" / "core" / "dist", pyscript,
                    ignore=shutil.ignore_patterns("*.map"))
    pycore_zip(DIST / "pycore.zip")
    page = (SITE / "index.html").read_text()
    shutil.copy2(ROOT / "docs" / "validation.md", DIST / "validation.md")
    for marker, text in (("{{FORM}}", form_html()), ("{{ACCURACY}}", html.escape(accuracy_html())), ("{{PYODIDE_VERSION}}", version("pyodide")),
                         ("{{PYSCRIPT_VERSION}}", version("@pyscript/core"))):
        if marker not in page:
            fail(f"site/index.html lacks {marker}")
        page = page.replace(marker, text)
    (DIST / "index.html").write_text(page)
    (DIST / ".nojekyll").write_text("")
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
