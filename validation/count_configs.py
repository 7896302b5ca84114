"""Count the parameters of every config.json under tests/configs/ with transformers itself, on the meta device.

Dev-only (needs torch and transformers). Each file is a model's published config.json (or, for the presets
built by validation/hf_models.py, transformers' own ``config.to_dict()``); the model is built from it exactly
as ``AutoModelForCausalLM.from_config`` builds it, and ``sum(p.numel())`` is written to
validation/config_counts.json, keyed by the file's path under tests/configs/. tests/test_import.py checks
pycore's count of each imported file against that number.

Usage: python validation/count_configs.py
"""

import json
from pathlib import Path

import torch
import transformers

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "tests" / "configs"
OUT = ROOT / "validation" / "config_counts.json"


def count(config_dict):
    """sum(p.numel()) of the model transformers builds from a config.json's contents."""
    config_dict = dict(config_dict)
    config = transformers.AutoConfig.for_model(config_dict.pop("model_type"), **config_dict)
    auto = transformers.AutoModelForMaskedLM if config.model_type == "bert" else transformers.AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(config)
    return sum(p.numel() for p in model.parameters())


def main():
    counts = {}
    for path in sorted(CONFIGS.rglob("*.json")):
        name = str(path.relative_to(CONFIGS))
        counts[name] = count(json.loads(path.read_text()))
        print(f"{name:36s} {counts[name]:>16,d}", flush=True)
    OUT.write_text(json.dumps({"about": "sum(p.numel() for p in model.parameters()) of the model "
                                        "AutoModelForCausalLM.from_config builds from each tests/configs file, "
                                        "on the meta device (validation/count_configs.py)",
                               "torch": torch.__version__, "transformers": transformers.__version__,
                               "counts": counts}, indent=1) + "\n")


if __name__ == "__main__":
    main()
