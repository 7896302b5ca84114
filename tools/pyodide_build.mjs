// Build-time jobs that need Pyodide's own Python (3.14, wasm32); build.py runs them with node.
//
//   node tools/pyodide_build.mjs compile IN.whl OUT.whl
//       IN's modules byte-compiled for Pyodide's Python, sources dropped (what Pyodide does to the
//       wheels it distributes): importing micropip from .pyc takes a tenth of the time from source.
//       Hash-based, unchecked .pyc files and fixed zip timestamps keep OUT deterministic.
//   node tools/pyodide_build.mjs snapshot WHEEL OUT
//       A Pyodide memory snapshot taken once WHEEL is unpacked and `pycore.output.web` imported, with the
//       presets read: loadPyodide({_loadSnapshot}) then starts with pycore already imported.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const { loadPyodide } = await import(join(root, "node_modules", "pyodide", "pyodide.mjs"));
const indexURL = join(root, "node_modules", "pyodide") + "/";
const [job, input, output] = process.argv.slice(2);

const COMPILE = `
import base64, hashlib, importlib.util, io, zipfile
from importlib._bootstrap_external import _code_to_hash_pyc

DATE = (1980, 1, 1, 0, 0, 0)

def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"

def compile_wheel(data):
    entries = {}
    with zipfile.ZipFile(io.BytesIO(data)) as wheel:
        for name in wheel.namelist():
            if name.endswith("/"):
                continue
            content = wheel.read(name)
            if name.endswith(".py"):
                code = compile(content, "/lib/python3.14/site-packages/" + name, "exec", dont_inherit=True)
                source_hash = importlib.util.source_hash(content)
                entries[name + "c"] = bytes(_code_to_hash_pyc(code, source_hash, checked=False))
            else:
                entries[name] = content
    record = next(name for name in entries if name.endswith(".dist-info/RECORD"))
    lines = [record_line(name, content) for name, content in sorted(entries.items()) if name != record]
    entries[record] = ("\\n".join(lines + [f"{record},,"]) + "\\n").encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            wheel.writestr(info, entries[name])
    return out.getvalue()
`;

if (job === "compile") {
  const py = await loadPyodide({ indexURL });
  py.FS.writeFile("/tmp/in.whl", new Uint8Array(readFileSync(input)));
  py.runPython(COMPILE + `
with open("/tmp/in.whl", "rb") as source, open("/tmp/out.whl", "wb") as target:
    target.write(compile_wheel(source.read()))
`);
  writeFileSync(output, py.FS.readFile("/tmp/out.whl"));
} else if (job === "snapshot") {
  // The same snapshot from build to build: while it is made, the clock stands still and the entropy
  // Python seeds itself with is fixed (site/main.py reseeds random in the page).
  const nodeCrypto = await import("node:crypto");
  let counter = 0;
  nodeCrypto.default.randomFillSync = (view) => {
    const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (counter++ * 2654435761) >>> 24;
    return view;
  };
  Date.now = () => 315532800000;
  performance.now = () => 0;
  const py = await loadPyodide({ indexURL, _makeSnapshot: true, env: { PYTHONHASHSEED: "0" } });
  // Into site-packages, where micropip (first visit) and loadPackage (later visits) put the same wheel's
  // files again after the snapshot is restored: a snapshot holds Python's memory, not its files.
  const sitePackages = py.runPython("import sysconfig; sysconfig.get_paths()['purelib']");
  py.unpackArchive(new Uint8Array(readFileSync(input)), "wheel", { extractDir: sitePackages });
  // Every pycore module imported, the lazily imported ones too (what fits, config import), with the
  // standard library modules micropip imports (PyScript installs pycore's wheel with it on a first
  // visit): a third of micropip's import time. micropip itself cannot be in the snapshot: it keeps
  // references to JavaScript functions, which a snapshot cannot hold.
  py.runPython(`
import asyncio, email.message, email.parser, hashlib, html.parser, importlib.metadata, ipaddress, platform
import sysconfig, urllib.parse, zipfile
import importlib, pkgutil
importlib.invalidate_caches()
import pycore
for module in pkgutil.iter_modules(pycore.__path__):
    if module.name != "__main__":
        importlib.import_module("pycore." + module.name)
import pycore.output.web as web
web.run(''); web.run('', False); web.answers('')
`);
  writeFileSync(output, py.makeMemorySnapshot());
} else {
  console.error("usage: node tools/pyodide_build.mjs compile IN.whl OUT.whl | snapshot WHEEL OUT");
  process.exit(2);
}
