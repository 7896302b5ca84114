"""Parameter counts of the task heads (issue 10: `head`, `num_labels`) from transformers on the meta device.

Builds each config in tests/configs/ as its *ForSequenceClassification (num_labels 2 and 5) and as its base
model (AutoModel: no head), and records sum(p.numel()) into validation/head_counts.json, which
tests/test_heads.py compares with pycore's counts. Dev-only: needs torch and transformers.

Usage: python validation/count_heads.py
"""

import json
from pathlib import Path

import torch
import transformers

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ["llama-3.1-8b.json", "gpt2.json", "bert-base-uncased.json", "qwen2.5-0.5b.json", "mixtral-8x7b-v0.1.json"]


def count(model):
    return sum(p.numel() for p in model.parameters())


def main():
    out = {"torch": torch.__version__, "transformers": transformers.__version__, "counts": {}}
    for name in CONFIGS:
        raw = json.loads((ROOT / "tests" / "configs" / name).read_text())
        for labels in (2, 5):
            config = transformers.AutoConfig.for_model(**{**raw, "num_labels": labels})
            with torch.device("meta"):
                model = transformers.AutoModelForSequenceClassification.from_config(config)
            out["counts"][f"{name} classification {labels}"] = count(model)
        config = transformers.AutoConfig.for_model(**raw)
        with torch.device("meta"):
            out["counts"][f"{name} none"] = count(transformers.AutoModel.from_config(config))
    (ROOT / "validation" / "head_counts.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
