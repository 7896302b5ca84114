# Page glue: hands pycore's JSON entry point to the page script. All memory arithmetic is in pycore.
import gc
import random

from js import document, window
from pyodide.ffi import create_proxy

from pycore import web

random.seed()  # after a start from the build's memory snapshot (pyodide/start.mjs), random would repeat its state
window.pycoreRun = create_proxy(web.run)
window.pycoreHeadline = create_proxy(web.headline)
window.pycoreAnswers = create_proxy(web.answers)
window.pycoreCsv = create_proxy(web.csv)
window.pycoreImport = create_proxy(web.import_config)
window.pycoreFits = create_proxy(web.fits)
# Everything imported so far lives as long as the page: kept out of the collector's full passes, which
# otherwise walk it all every so many keystrokes (a slow keystroke in twenty, measured in Chromium).
gc.freeze()
document.documentElement.classList.add("py-ready")
window.dispatchEvent(window.CustomEvent.new("pycore-ready"))
