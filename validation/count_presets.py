"""Count every preset's parameters with transformers itself, on the meta device (nothing is allocated).

Dev-only (needs torch and transformers). Writes validation/param_counts.json and the 'params' field of
presets/models.json; tests/test_parameters.py checks pycore's own count against both. A preset whose
published config.json is kept in tests/configs/<id or alias>.json is built from that file (AutoModelForCausalLM.from_config);
the others from the transformers config validation/hf_models.py writes for their fields.

Usage: python validation/count_presets.py
"""

import json
import sys
from pathlib import Path

import torch
import transformers

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "validation"))
import count_configs  # noqa: E402
import hf_models  # noqa: E402
from pycore.model import catalog  # noqa: E402

OUT = ROOT / "validation" / "param_counts.json"
PRESETS = ROOT / "presets" / "models.json"


def main():
    counts = {}
    for model_id in catalog.models():
        arch = catalog.architecture(model_id)
        if arch.kind == "generic":
            continue
        names = [model_id, *catalog.models()[model_id].get("aliases", [])]
        published = next((path for path in (count_configs.CONFIGS / f"{name}.json" for name in names) if path.is_file()),
                         count_configs.CONFIGS / f"{model_id}.json")
        if published.is_file():
            config = json.loads(published.read_text())
            # a vision tower pycore counts (arch.vision_layers) is counted here too; one it leaves out, not
            counts[model_id] = count_configs.count(config) + (count_configs.vision_count(config)
                                                              if arch.vision_layers else 0)
        else:
            build = transformers.AutoModelForImageTextToText.from_config if arch.vision_layers else \
                getattr(transformers, arch.hf_class)
            with torch.device("meta"):
                model = build(hf_models.config_for(arch))
            counts[model_id] = sum(p.numel() for p in model.parameters())
        print(f"{model_id:28s} {counts[model_id]:>16,d}", flush=True)
    OUT.write_text(json.dumps({"about": "sum(p.numel() for p in model.parameters()) of each preset, built by "
                                        "validation/count_presets.py on the meta device",
                               "torch": torch.__version__, "transformers": transformers.__version__,
                               "counts": counts}, indent=1) + "\n")
    doc = json.loads(PRESETS.read_text())
    for entry in doc["models"]:
        if entry["id"] in counts:
            entry["params"] = counts[entry["id"]]
    PRESETS.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
