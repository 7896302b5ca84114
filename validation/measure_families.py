"""Measure generate() and one training step of the other 2025-2026 families issue 29 names, whose parameters pycore
counts exactly: Apertus (xIELU MLP, q/k norms), OLMo 3 and EXAONE 4 (sliding layers, q/k norms), GLM-4.5 (dense first
layers, routed and shared experts) and Llama 4's text decoder (chunked and NoPE layers, interleaved MoE).

Dev-only: needs torch and transformers. validation/measure_hybrid.py's run_case does the work (real tensors, a warm-up
first, MemTracker, transformers' own kernels on the CPU); the configs are small copies of each family's transformers
5.24 default (tests/configs/families/<type>.json shrunk to 4 layers of 256, vocabulary 1,000) or its synthetic variant
(tests/configs/variants/). These record what pycore does not model yet as much as what it does (docs/validation.md).

Usage:
    /tmp/hf/bin/python validation/measure_families.py            # -> validation/measured_families.json
    /tmp/hf/bin/python validation/measure_families.py --compare  # the record beside pycore's estimate
"""

import argparse
import json
import platform
import sys
import tempfile
from pathlib import Path

import torch
import transformers

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import compare  # noqa: E402
import measure_hybrid  # noqa: E402

OUT = ROOT / "validation" / "measured_families.json"
FAMILY_DEFAULTS = ROOT / "tests" / "configs" / "families"
VARIANTS = ROOT / "tests" / "configs" / "variants"
SMALL = dict(hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2, vocab_size=1000,
             max_position_embeddings=4096, num_hidden_layers=4)
SLIDING = ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]


def _shrunk(model_type, **changes):
    config = json.loads((FAMILY_DEFAULTS / f"{model_type}.json").read_text())
    config.pop("head_dim", None)
    config.update(SMALL, **changes)
    return config


CONFIGS = {
    "apertus": _shrunk("apertus"),
    "olmo3": _shrunk("olmo3", layer_types=SLIDING, sliding_window=128),
    "exaone4": _shrunk("exaone4", layer_types=SLIDING, sliding_window=128),
    "glm4_moe": json.loads((VARIANTS / "synthetic-glm4-moe-qk-norm.json").read_text()),
    "llama4_text": json.loads((VARIANTS / "synthetic-llama4-interleaved.json").read_text()),
}
RUNS = [(family, "a", mode, "bf16", 2, 512, 8 if mode == "infer" else 0) for family in CONFIGS
        for mode in ("infer", "train")]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare", action="store_true", help="print the record beside pycore's estimate")
    args = parser.parse_args()
    if args.compare:
        for row in compare.families_rows()[1]:
            print(f"{row['label']:36s} measured {row['measured'] / 2**20:8.2f} MiB  estimate "
                  f"{row['estimated'] / 2**20:8.2f} MiB  {100 * row['error']:+6.1f}%")
        return
    measure_hybrid.config_json = lambda family, size: CONFIGS[family]
    cases = []
    with tempfile.TemporaryDirectory() as folder:
        for run in RUNS:
            result = measure_hybrid.run_case(*run, folder)
            print(f"{result['label']:36s} peak {result['peak_bytes'] / 2**20:8.2f} MiB", flush=True)
            cases.append(result)
    OUT.write_text(json.dumps({"about": __doc__.split("\n\n")[0], "torch": torch.__version__,
                               "transformers": transformers.__version__, "python": platform.python_version(),
                               "cases": cases}, indent=1) + "\n")


if __name__ == "__main__":
    main()
