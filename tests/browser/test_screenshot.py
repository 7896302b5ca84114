"""The README's picture of the page, docs/page.png, taken by this test so it cannot drift from the page.

Every run loads the default page at 1440x900 in Chromium, waits until the real number and the answers
are drawn, and screenshots it into a temporary folder: the committed PNG must have the same size and must
record the same total as the page paints now (the total is written into the PNG as a tEXt chunk).
Pixels are not compared (fonts and anti-aliasing differ between machines), so CI never rewrites the file.

To refresh docs/page.png after the page or the default estimate changed:

    .venv/bin/python build.py
    UPDATE_SCREENSHOT=1 DIST_DIR=dist .venv/bin/python -m pytest -q tests/browser/test_screenshot.py -p no:cacheprovider
"""

import os
import struct
import zlib
from pathlib import Path

import pytest
from conftest import Watched

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
PICTURE = ROOT / "docs" / "page.png"
WIDTH, HEIGHT = 1440, 900
KEY = "pycore-total-bytes"                     # the tEXt keyword holding the total the picture shows


def png_size(data):
    """(width, height) from a PNG's IHDR chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def png_text(data):
    """The PNG's tEXt chunks as {keyword: text}."""
    found, at = {}, 8
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        if kind == b"tEXt":
            keyword, _, text = data[at + 8:at + 8 + length].partition(b"\0")
            found[keyword.decode("latin-1")] = text.decode("latin-1")
        at += 12 + length
    return found


def with_text(data, keyword, text):
    """The PNG with a tEXt chunk added just before IEND."""
    body = b"tEXt" + keyword.encode("latin-1") + b"\0" + text.encode("latin-1")
    chunk = struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body))
    end = data.rindex(b"IEND") - 4
    return data[:end] + chunk + data[end:]


def test_png_helpers_round_trip():
    data = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", 3, 2) + bytes(5) + bytes(4)
    data += struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND"))
    marked = with_text(data, KEY, "123")
    assert png_size(marked) == (3, 2)
    assert png_text(marked) == {KEY: "123"}
    assert marked.endswith(b"IEND" + struct.pack(">I", zlib.crc32(b"IEND")))


def test_the_readme_picture_is_the_default_page_at_1440x900(browser, base_url, tmp_path):
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=1)
    try:
        watched = Watched(context, base_url)
        page = watched.open(base_url)              # the real number painted and the answers drawn
        page.evaluate("scrollTo(0, 0)")
        total = page.evaluate("document.documentElement.dataset.totalBytes")
        shot = with_text(page.screenshot(), KEY, total)
        assert not watched.errors and not watched.outside, (watched.errors, watched.outside)
    finally:
        context.close()
    assert png_size(shot) == (WIDTH, HEIGHT)
    (tmp_path / "page.png").write_bytes(shot)

    if os.environ.get("UPDATE_SCREENSHOT") == "1":
        PICTURE.write_bytes(shot)
    committed = PICTURE.read_bytes()
    refresh = "refresh it as this test's docstring says (UPDATE_SCREENSHOT=1)"
    assert png_size(committed) == (WIDTH, HEIGHT), f"docs/page.png is not {WIDTH}x{HEIGHT}: {refresh}"
    assert png_text(committed).get(KEY) == total, (
        f"docs/page.png shows a total of {png_text(committed).get(KEY)} bytes, the default page now {total}: {refresh}")
    assert len(committed) < 1_000_000, "docs/page.png is over 1 MB"
