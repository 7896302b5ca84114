# Page glue: hands pycore's JSON entry point to the page script. All memory arithmetic is in pycore.
import gc
import random
import time

from js import document, navigator, window
from pyodide.ffi import create_proxy

from pycore.output import web
from pycore.base.steps import finish

# The answers for the latest breakdown, made a few estimates at a time in the gaps between keystrokes
# (app.js answersAhead): when typing pauses they are ready to draw, and a key never waits for a search.
ahead: dict = {"query": None, "steps": None, "json": None}


def answers_begin(query: str) -> None:
    ahead.update(query=query, steps=web.answers_steps(query), json=None)


def answers_slice(ms: float) -> bool:
    """Run the begun answers' steps for ``ms`` milliseconds at most, less when an input is waiting
    (Chromium's isInputPending); True once they are done."""
    steps = ahead["steps"]
    if steps is None:
        return True
    deadline = time.perf_counter() + ms / 1000
    scheduling = getattr(navigator, "scheduling", None)
    try:
        while True:
            next(steps)
            if time.perf_counter() >= deadline or (scheduling is not None and scheduling.isInputPending()):
                return False
    except StopIteration as done:
        ahead.update(steps=None, json=done.value)
        return True
    except BaseException:
        ahead.update(query=None, steps=None)
        raise


def answers_for(query: str) -> str:
    """The answers' JSON for ``query``: those begun ahead when they are for it (finished now if need be),
    else made now."""
    if query != ahead["query"]:
        return web.answers(query)
    steps, made = ahead["steps"], ahead["json"]
    ahead.update(query=None, steps=None, json=None)
    return made if steps is None else finish(steps)


def _bytes(data) -> bytes:
    """A JavaScript Uint8Array (or bytes already) as bytes."""
    return data.to_bytes() if hasattr(data, "to_bytes") else bytes(data)


def header_need(name: str, size: int, data) -> int:
    return web.header_need(str(name), int(size), _bytes(data))


def header_summary(files, origin: str = "") -> str:
    """``files``: a JavaScript array of [name, size, Uint8Array of the header bytes read]."""
    return web.header_summary([(str(f[0]), int(f[1]), _bytes(f[2])) for f in files], str(origin))


random.seed()  # after a start from the build's memory snapshot (pyodide/start.mjs), random would repeat its state
window.pycoreRun = create_proxy(web.run)
window.pycoreHeadline = create_proxy(web.headline)
window.pycoreAnswers = create_proxy(web.answers)
window.pycoreAnswersBegin = create_proxy(answers_begin)
window.pycoreAnswersSlice = create_proxy(answers_slice)
window.pycoreAnswersFor = create_proxy(answers_for)
window.pycoreCsv = create_proxy(web.csv)
window.pycoreImport = create_proxy(web.import_config)
window.pycoreFits = create_proxy(web.fits)
window.pycoreUnread = create_proxy(web.unread)
window.pycoreLaunch = create_proxy(web.launch)
window.pycoreLaunchRead = create_proxy(web.launch_read)
window.pycoreCalibrate = create_proxy(web.calibration)
window.pycoreHeaderNeed = create_proxy(header_need)
window.pycoreHeaderSummary = create_proxy(header_summary)
window.pycoreHeaderShards = create_proxy(lambda index: web.header_shards(_bytes(index)))
# Everything imported so far lives as long as the page: kept out of the collector's full passes, which
# otherwise walk it all every so many keystrokes (a slow keystroke in twenty, measured in Chromium).
gc.freeze()
document.documentElement.classList.add("py-ready")
window.dispatchEvent(window.CustomEvent.new("pycore-ready"))
