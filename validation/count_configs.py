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


# a multimodal model's image side (LLaVA-NeXT's image_newline, a vector of the decoder's width, among it)
VISION = ("visual.", "vision_tower.", "vision_model.", "multi_modal_projector.", "image_newline")


def count(config_dict):
    """sum(p.numel()) of the model transformers builds from a config.json's contents; for a vision-language
    config (one with vision_config), of its text decoder and head alone: the model
    AutoModelForImageTextToText builds, less the parameters under its vision tower and projector (what pycore
    counts today; vision_counts() gives the rest)."""
    return _counts(config_dict)[0]


def vision_count(config_dict):
    return _counts(config_dict)[1]


def _counts(config_dict):
    # as transformers reads a config.json: {"__float__": "Infinity"} (how transformers 5 writes an infinite float) is
    # the float itself
    config_dict = dict(transformers.PreTrainedConfig._decode_special_floats(config_dict))
    config = transformers.AutoConfig.for_model(config_dict.pop("model_type"), **config_dict)
    multimodal = "vision_config" in config_dict
    auto = transformers.AutoModelForMaskedLM if config.model_type == "bert" else \
        transformers.AutoModelForImageTextToText if multimodal else transformers.AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(config)
    vision = sum(p.numel() for name, p in model.named_parameters() if any(part in name for part in VISION))
    return sum(p.numel() for p in model.parameters()) - vision, vision


def main():
    counts, vision = {}, {}
    for path in sorted(CONFIGS.rglob("*.json")):
        name = str(path.relative_to(CONFIGS))
        counts[name], seen = _counts(json.loads(path.read_text()))
        if seen:
            vision[name] = seen
        print(f"{name:36s} {counts[name]:>16,d} {seen or '':>16}", flush=True)
    OUT.write_text(json.dumps({"about": "sum(p.numel() for p in model.parameters()) of the model "
                                        "AutoModelForCausalLM.from_config builds from each tests/configs file, "
                                        "on the meta device (validation/count_configs.py); for a vision-language "
                                        "config, AutoModelForImageTextToText's less its vision tower and "
                                        "projector, which vision_counts holds",
                               "torch": torch.__version__, "transformers": transformers.__version__,
                               "counts": counts,
                               "vision_counts": vision}, indent=1) + "\n")


if __name__ == "__main__":
    main()
