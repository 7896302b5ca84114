"""Measure activation bytes per sample of the generic vision presets (ResNet-50, ViT-B/16).

Dev-only (torch, transformers). For each model and dtype, MemTracker records the peak of a training
step (AdamW, after a warm-up step) at two batch sizes, activations under FakeTensorMode; the difference divided by
the batch difference is what one more sample adds to the peak. Writes validation/vision_measured.json
and the presets' act_per_sample_* fields.

Usage: python validation/measure_vision.py
"""

import json
from pathlib import Path

import torch
import transformers
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "validation" / "vision_measured.json"
PRESETS = ROOT / "presets" / "models.json"
MODELS = {
    "resnet-50": (transformers.ResNetForImageClassification, transformers.ResNetConfig(num_labels=1000),
                  "huggingface.co/microsoft/resnet-50 config.json (2022-03-16)"),
    "vit-base-patch16-224": (transformers.ViTForImageClassification, transformers.ViTConfig(num_labels=1000),
                             "huggingface.co/google/vit-base-patch16-224 config.json (2020-10-22)"),
}
BATCHES = (8, 16)


def peak(cls, config, dtype, batch):
    torch.manual_seed(0)
    model = cls(config).to(dtype)           # real weights (ViT's init is data-dependent); fake activations
    with FakeTensorMode(allow_non_fake_inputs=True):
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), foreach=True)
        pixels = torch.randn(batch, 3, 224, 224, dtype=dtype)
        labels = torch.randint(0, 1000, (batch,))

        def step():
            logits = model(pixel_values=pixels).logits
            torch.nn.functional.cross_entropy(logits, labels).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        step()
        tracker = MemTracker()
        tracker.track_external(model, optimizer, pixels, labels)
        with tracker:
            step()
        params = sum(p.numel() for p in model.parameters())
    (device_peak,) = tracker.get_tracker_snapshot("peak").values()
    return params, device_peak["Total"]


def main():
    record = {"about": __doc__.split("\n\n")[1].replace("\n", " "), "torch": torch.__version__,
              "transformers": transformers.__version__, "batches": BATCHES, "models": {}}
    for model_id, (cls, config, source) in MODELS.items():
        row = {"source": source}
        for name, dtype in (("fp32", torch.float32), ("16", torch.bfloat16)):
            (params, small), (_, large) = (peak(cls, config, dtype, b) for b in BATCHES)
            row["params"] = params
            row[f"peak_b{BATCHES[0]}_{name}"], row[f"peak_b{BATCHES[1]}_{name}"] = small, large
            row[f"act_per_sample_{name}"] = (large - small) // (BATCHES[1] - BATCHES[0])
        print(model_id, row, flush=True)
        record["models"][model_id] = row
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    doc = json.loads(PRESETS.read_text())
    models = {m["id"]: m for m in doc["models"]}
    for model_id, row in record["models"].items():
        models[model_id] = {"id": model_id, "aliases": [], "kind": "generic", "hf_class": MODELS[model_id][0].__name__,
                            "act_per_sample_fp32": row["act_per_sample_fp32"], "act_per_sample_16": row["act_per_sample_16"],
                            "params": row["params"], "source": row["source"] + "; activations: validation/vision_measured.json"}
    doc["models"] = sorted(models.values(), key=lambda m: m["id"])
    PRESETS.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
