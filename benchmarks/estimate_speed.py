"""How long one pycore.estimate call takes in CPython (target: under 1 ms).

Usage: python benchmarks/estimate_speed.py
Prints the median and 95th percentile over many calls for a few typical inputs.
"""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pycore import estimate  # noqa: E402
from pycore import web  # noqa: E402

INPUTS = {
    "default (llama-3.1-8b training)": {},
    "gpt2, eager, full recompute": {"model": "gpt2", "attention": "eager", "recompute": "full", "batch": "16"},
    "mixtral serving": {"model": "mixtral-8x7b", "mode": "infer", "precision": "bf16", "batch": "32"},
}
CALLS = 2000


def timings(function):
    samples = []
    for _ in range(CALLS):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * len(samples))]


def main():
    print(f"Python {sys.version.split()[0]}, {CALLS} calls each")
    for label, inputs in INPUTS.items():
        median, p95 = timings(lambda: estimate(inputs))
        print(f"estimate  {label:34s} median {1e3 * median:6.3f} ms   p95 {1e3 * p95:6.3f} ms")
    query = "&".join(f"{k}={v}" for k, v in INPUTS["gpt2, eager, full recompute"].items())
    median, p95 = timings(lambda: web.run(query))
    print(f"web.run   {'(estimate + formulas + JSON)':34s} median {1e3 * median:6.3f} ms   p95 {1e3 * p95:6.3f} ms")
    median, p95 = timings(lambda: web.answers(query))
    print(f"web.answers {'(the answers and their searches)':32s} median {1e3 * median:6.3f} ms   p95 {1e3 * p95:6.3f} ms")


if __name__ == "__main__":
    main()
