"""How long pycore's entry points take in CPython: one estimate (target: under 1 ms), the page's keystroke
(web.run), and what follows a pause in typing (web.answers: plans, searches, charts; web.fits) for the
70B FSDP case issue 13 names (target in the browser: 50 ms; benchmarks/page_speed.py measures it there).

Usage: python benchmarks/estimate_speed.py
Prints the median and 95th percentile over many calls.
"""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pycore import estimate  # noqa: E402
from pycore.output import web  # noqa: E402
from pycore.memory.activations import per_token  # noqa: E402
from pycore.memory.estimate import _totals_only  # noqa: E402
from pycore.memory.model_states import model_states  # noqa: E402

INPUTS = {
    "default (llama-3.1-8b training)": {},
    "gpt2, eager, full recompute": {"model": "gpt2", "attention": "eager", "recompute": "full", "batch": "16", "seq": "1024"},
    "mixtral serving": {"model": "mixtral-8x7b", "mode": "infer", "precision": "bf16", "batch": "32"},
}
CALLS = 2000
SLOW_CALLS = 40
FSDP_70B = "model=llama-3.1-70b&precision=bf16&fsdp=FULL_SHARD&dp=8&recompute=full&train_tokens=2T"


def timings(function, calls=CALLS):
    samples = []
    for _ in range(calls):
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
    # The searches remember totals (pycore.memory.estimate.totals_only), model states and activations per token:
    # each call here starts with none, as a pause after a changed model does.
    def fresh(function):
        return lambda: (_totals_only.cache_clear(), model_states.cache_clear(), per_token.cache_clear(),
                        function())

    for label, function in (("web.headline 70B FSDP (keystroke's own frame)",
                             lambda: (_totals_only.cache_clear(), web.headline(FSDP_70B))),
                            ("web.run     70B FSDP (keystroke's next frame)", lambda: web.run(FSDP_70B, False)),
                            ("web.answers 70B FSDP (plans, searches, charts)", fresh(lambda: web.answers(FSDP_70B))),
                            ("web.answers default page", fresh(lambda: web.answers(""))),
                            ("web.fits    what fits on 2 × RTX 4090, serving", fresh(lambda: web.fits(
                                "gpu=rtx-4090&gpus=2&mode=infer&seq=8192")))):
        median, p95 = timings(function, SLOW_CALLS)
        print(f"{label:44s} median {1e3 * median:7.2f} ms   p95 {1e3 * p95:7.2f} ms")


if __name__ == "__main__":
    main()
