"""Reading a 30-shard checkpoint's headers from the hub in the page: bytes transferred and time to a result.

Usage: python build.py && python benchmarks/hub_headers.py [RUNS] [DIST]

Writes a Llama-3.1-70B-shaped bf16 checkpoint (80 layers, 723 tensors, 141,107,412,992 bytes of weights) as 30
sparse .safetensors shards with transformers' model.safetensors.index.json (the files take almost no disk: only
their headers are written), serves them with the local stand-in for the hub (tests/browser/hub_standin.py, which
honours HTTP Range requests), and in headless Chromium types the id into "Read the checkpoint's headers", clicks
"Read from the hub" and waits for pycore's result on the page. The stand-in answers HTTPS with a certificate made
here (openssl) and Chromium resolves huggingface.co to it (--host-resolver-rules, --ignore-certificate-errors), so
the page's own requests to https://huggingface.co reach it directly over HTTP/1.1 and TLS, as they would the hub;
every other host is refused (nothing reaches the network). The tests route through Playwright instead, which adds
its own time to each request.

Prints, over RUNS runs (default 5): the body bytes the stand-in sent (the index whole, then per shard its 8-byte
length and its 8 bytes + JSON header), the requests, and the time from the click to the result drawn (median, min,
max). Goal (issue 30): under 2 MB and under 1 s. It also checks that the page's weight_bytes equals
python -m pycore header=FOLDER's total for the same files.
"""

import json
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "browser"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from hub_standin import StandInHub  # noqa: E402
from page_speed import ARGS, serve  # noqa: E402

from pycore.model.checkpoint import read_path  # noqa: E402

SHARDS = 30
# Llama-3.1-70B's config.json: hidden 8192, 80 layers, 64 heads of 128, 8 KV heads, intermediate 28672, vocab 128256
HIDDEN, LAYERS, KV, FFN, VOCAB = 8192, 80, 1024, 28672, 128256


def tensors():
    """(name, shape) in transformers' order; every tensor bf16 (2 bytes a number)."""
    out = [("model.embed_tokens.weight", (VOCAB, HIDDEN))]
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        out += [(p + "self_attn.q_proj.weight", (HIDDEN, HIDDEN)), (p + "self_attn.k_proj.weight", (KV, HIDDEN)),
                (p + "self_attn.v_proj.weight", (KV, HIDDEN)), (p + "self_attn.o_proj.weight", (HIDDEN, HIDDEN)),
                (p + "mlp.gate_proj.weight", (FFN, HIDDEN)), (p + "mlp.up_proj.weight", (FFN, HIDDEN)),
                (p + "mlp.down_proj.weight", (HIDDEN, FFN)), (p + "input_layernorm.weight", (HIDDEN,)),
                (p + "post_attention_layernorm.weight", (HIDDEN,))]
    return out + [("model.norm.weight", (HIDDEN,)), ("lm_head.weight", (VOCAB, HIDDEN))]


def nbytes(shape):
    count = 2
    for size in shape:
        count *= size
    return count


def write_checkpoint(folder):
    """30 sparse shards of about equal size and the index; the weights' bytes in all."""
    every = tensors()
    total = sum(nbytes(shape) for _, shape in every)
    names = [f"model-{i + 1:05d}-of-{SHARDS:05d}.safetensors" for i in range(SHARDS)]
    groups, at = [[] for _ in range(SHARDS)], 0
    for name, shape in every:
        groups[min(SHARDS - 1, at * SHARDS // total)].append((name, shape))
        at += nbytes(shape)
    weight_map = {}
    for file, group in zip(names, groups):
        header, offset = {"__metadata__": {"format": "pt"}}, 0
        for name, shape in group:
            header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + nbytes(shape)]}
            offset += nbytes(shape)
            weight_map[name] = file
        raw = json.dumps(header, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)
        with open(folder / file, "wb") as handle:
            handle.write(struct.pack("<Q", len(raw)) + raw)
            handle.truncate(8 + len(raw) + offset)          # sparse: the tensors' bytes are never written
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    return total


def certificate(folder):
    """A self-signed certificate for huggingface.co (openssl), for the stand-in's HTTPS: (cert file, key file)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-keyout", str(key),
                    "-out", str(cert), "-subj", "/CN=huggingface.co", "-addext", "subjectAltName=DNS:huggingface.co"],
                   check=True, capture_output=True)
    return str(cert), str(key)


RESULT = """() => new Promise((resolve) => {
  const status = document.getElementById('checkpoint-status');
  const start = performance.now();
  new MutationObserver((_, observer) => {
    if (status.textContent.includes('GiB of weights') || status.className.includes('failed')) {
      observer.disconnect();
      resolve([performance.now() - start, status.textContent]);
    }
  }).observe(status, { childList: true, characterData: true, subtree: true, attributes: true });
  document.getElementById('checkpoint-fetch').click();
})"""


def main(runs=5, dist=ROOT / "dist"):
    import page_speed
    page_speed.DIST = Path(dist)
    folder = Path(tempfile.mkdtemp(prefix="hub-headers-"))
    try:
        total = write_checkpoint(folder)
        expected = read_path(str(folder)).total_bytes
        assert expected == total, (expected, total)
        tls = certificate(folder)
        server, url = serve()
        try:
            with StandInHub(folder, tls) as hub, sync_playwright() as driver:
                executable = shutil.which("chromium") or shutil.which("chromium-browser")
                flags = [f"--host-resolver-rules=MAP huggingface.co:443 127.0.0.1:{hub.port}",
                         "--ignore-certificate-errors"]
                browser = driver.chromium.launch(args=ARGS + flags,
                                                 **({"executable_path": executable} if executable else {}))
                context = browser.new_context()
                page = context.new_page()
                outside = []
                page.on("request", lambda r: r.url.startswith((url, "https://huggingface.co/", "data:", "blob:"))
                        or outside.append(r.url))
                page.goto(url)
                page.wait_for_selector("html.py-ready", timeout=120_000)
                page.locator("#checkpoint > summary").click()
                page.locator("#checkpoint-hub").fill("meta-llama/Llama-3.1-70B")
                times, sent, requests = [], [], []
                for _ in range(runs):
                    before, asked = hub.sent, hub.requests
                    ms, text = page.evaluate(RESULT)
                    if "GiB of weights" not in text:
                        raise SystemExit(f"no result: {text}")
                    times.append(ms)
                    sent.append(hub.sent - before)
                    requests.append(hub.requests - asked)
                page.wait_for_function(f"new URLSearchParams(location.search).get('weight_bytes') === '{expected}'")
                shown = dict(parse_qsl(urlsplit(page.url).query))["weight_bytes"]
                browser.close()
                if outside:
                    raise SystemExit(f"requests outside localhost and the stand-in: {outside[:3]}")
        finally:
            server.terminate()
            server.wait(10)
    finally:
        shutil.rmtree(folder)
    print(f"checkpoint: {SHARDS} shards, {len(tensors())} tensors, {total:,} bytes of weights "
          f"({total / 2**30:,.2f} GiB, GiB = 2^30 bytes); page's weight_bytes {shown} "
          f"({'equal to' if int(shown) == expected else 'DIFFERENT from'} python -m pycore header=FOLDER)")
    print(f"transferred per read: {statistics.median(sent):,.0f} bytes ({statistics.median(sent) / 2**20:.3f} MiB) "
          f"in {statistics.median(requests):.0f} requests (goal: under 2 MB)")
    print(f"click to result on the page, over {runs} runs: median {statistics.median(times):.0f} ms, "
          f"min {min(times):.0f} ms, max {max(times):.0f} ms (goal: under 1 s)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "dist")
