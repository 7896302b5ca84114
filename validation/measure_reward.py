"""Measures one reward-model training step as TRL's RewardTrainer runs it, on the CPU under PyTorch's MemTracker, as
validation/measure.py measures the other training cases.

Dev-only: needs torch, transformers, peft, accelerate and trl (TRL 1.16.0 was read and run). The step is TRL's own
loss: ``trl.trainer.reward_trainer.RewardTrainer.compute_loss`` is called with the attributes it reads set as
``RewardTrainer.__init__`` sets them for RewardConfig's defaults (no center_rewards_coefficient, no margin), then
``loss.backward()``, the optimizer step and ``zero_grad(set_to_none=True)`` as the Trainer's training_step does.
What it runs, as RewardTrainer sets it up:

- the model is ``AutoModelForSequenceClassification`` with ``num_labels=1`` (reward_trainer.py L396-400): the
  decoder and a one-output ``score`` head in place of the LM head, its score read at each row's last token;
- chosen and rejected sequences are one batch of 2 × pairs rows (DataCollatorForPreference's
  ``torch.cat((chosen, rejected))``), the loss ``-logsigmoid(r_chosen - r_rejected).mean()``;
- gradient checkpointing where recompute=full (RewardConfig's default gradient_checkpointing=True),
  use_reentrant=False; a LoRA policy (``reward-lora``) is PEFT's ``SEQ_CLS`` task, whose score head is trained beside
  the adapters (``modules_to_save``), with ``enable_input_require_grads()`` under checkpointing.

Every case runs real tensors on small configs in bf16 (the model loaded in bf16) or amp-bf16 (RewardConfig's default
for a model it loads by name: fp32 weights, bf16=True autocast), with measure.py's CUDA-like set-up.

Usage:
    python validation/measure_reward.py              # every case -> validation/measured_reward.json
    python validation/measure_reward.py --only lora  # the cases whose label says lora, printed only
"""

import argparse
import contextlib
import json
import sys
import time
import types
from pathlib import Path

import torch
import transformers
from torch.distributed._tools.mem_tracker import MemTracker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "validation"))
import hf_models  # noqa: E402
import measure  # noqa: E402
from cuda_autocast import cuda_autocast  # noqa: E402
from pycore.inputs import schema  # noqa: E402
from pycore.memory.estimate import resolve_architecture  # noqa: E402

OUT = ROOT / "validation" / "measured_reward.json"
LLAMA = dict(model="llama-3.1-8b", layers="2", hidden="512", heads="8", kv_heads="2", ffn="1408", vocab="32000")
LLAMA4 = dict(model="llama-3.1-8b", layers="4", hidden="768", heads="12", kv_heads="4", ffn="2048", vocab="32000")
QWEN = dict(model="qwen2.5-0.5b", layers="2", hidden="448", heads="7", kv_heads="1", ffn="1216", vocab="32000")

# (label, pycore inputs). batch counts preference pairs (RewardConfig's per_device_train_batch_size).
CASES = [
    ("llama small reward full bf16 b2s512", dict(**LLAMA, method="reward", precision="bf16", recompute="none",
                                                 batch="2", seq="512")),
    ("llama small reward full bf16 gc b4s512", dict(**LLAMA, method="reward", precision="bf16", recompute="full",
                                                    batch="4", seq="512")),
    ("llama small reward full amp-bf16 gc b2s1024", dict(**LLAMA, method="reward", precision="amp-bf16",
                                                         recompute="full", batch="2", seq="1024")),
    ("llama small reward full amp-bf16 b2s512", dict(**LLAMA, method="reward", precision="amp-bf16", recompute="none",
                                                     batch="2", seq="512")),
    ("llama 4L reward full bf16 b2s512", dict(**LLAMA4, method="reward", precision="bf16", recompute="none",
                                              batch="2", seq="512")),
    ("qwen small reward full bf16 b2s512", dict(**QWEN, method="reward", precision="bf16", recompute="none",
                                                batch="2", seq="512")),
    ("llama small reward lora qv bf16 b2s512", dict(**LLAMA, method="reward-lora", lora_targets="qv",
                                                    precision="bf16", recompute="none", batch="2", seq="512")),
    ("llama small reward lora all-linear amp-bf16 gc b2s512", dict(**LLAMA, method="reward-lora",
                                                                   lora_targets="all-linear", precision="amp-bf16",
                                                                   recompute="full", batch="2", seq="512")),
]
DTYPES = {"bf16": torch.bfloat16, "amp-bf16": torch.float32}


def build(inputs):
    """The one-label sequence classifier RewardTrainer builds, with PEFT's SEQ_CLS LoRA for reward-lora."""
    values = schema.parse(inputs)
    arch = resolve_architecture({**values, "head": "classification", "num_labels": 1})
    config = hf_models.config_for(arch)
    config.num_labels, config.pad_token_id = 1, 0
    torch.manual_seed(0)
    model = transformers.AutoModelForSequenceClassification.from_config(config, attn_implementation="sdpa")
    model = model.to(DTYPES[values["precision"]])
    lora = values["method"] == "reward-lora"
    if lora:
        from peft import LoraConfig, get_peft_model
        peft_config = LoraConfig(task_type="SEQ_CLS", r=values["lora_rank"], lora_alpha=2 * values["lora_rank"],
                                 target_modules=measure.LORA_MODULES[values["lora_targets"]])
        model = get_peft_model(model, peft_config)
    model.train()
    if values["recompute"] == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if lora:
            model.enable_input_require_grads()
    return values, arch, model


def make_batch(values, arch):
    """DataCollatorForPreference's batch: chosen rows then rejected rows (no padding: every row is seq long)."""
    ids = torch.randint(1, arch.vocab, (2 * values["batch"], values["seq"]))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def trainer(model):
    """The attributes RewardTrainer.compute_loss reads, as RewardTrainer.__init__ leaves them for one process."""
    from collections import defaultdict
    gather = types.SimpleNamespace(gather_for_metrics=lambda t: t, gather=lambda t: t)
    return types.SimpleNamespace(model=model, args=types.SimpleNamespace(center_rewards_coefficient=None),
                                 accelerator=gather, _total_train_tokens=0, _tp_size=1,
                                 _metrics={"train": defaultdict(list), "eval": defaultdict(list)})


def step(reward, model, optimizer, batch, autocast):
    from trl.trainer.reward_trainer import RewardTrainer
    with torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext():
        loss = RewardTrainer.compute_loss(reward, model, dict(batch))
    loss.backward()
    del loss
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def run_case(label, inputs):
    started = time.time()
    values, arch, model = build(inputs)
    impl = measure.optimizer_impl({**inputs, "method": "full"})
    optimizer = measure.make_optimizer([p for p in model.parameters() if p.requires_grad], values["optimizer"], impl)
    batch = make_batch(values, arch)
    reward, autocast = trainer(model), values["precision"].startswith("amp-")
    with cuda_autocast(autocast):
        step(reward, model, optimizer, batch, autocast)          # warm-up: optimizer state
    tracker = MemTracker()
    if values["method"] != "reward":
        track = tracker._track_module_params_and_buffers   # frozen base parameters take no gradient hooks
        tracker._track_module_params_and_buffers = lambda module, install_grad_hooks=True: track(module, False)
    tracker.track_external(model, optimizer, *batch.values())
    with tracker, cuda_autocast(autocast):
        step(reward, model, optimizer, batch, autocast)
    (peak,) = tracker.get_tracker_snapshot("peak").values()
    return {"label": label, "inputs": inputs, "tensor_mode": "real", "optimizer_impl": impl,
            "params": sum(p.numel() for p in model.parameters()), "peak_bytes": peak["Total"],
            "peak_breakdown": {getattr(k, "value", str(k)): v for k, v in peak.items() if k != "Total"},
            "seconds": round(time.time() - started, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="run only cases whose label contains this text; print, do not save")
    args = parser.parse_args()
    results = []
    for label, inputs in CASES:
        if args.only and args.only not in label:
            continue
        result = run_case(label, inputs)
        print(f"{label:56s} {result['peak_bytes'] / 2**20:8.1f} MiB  {result['seconds']} s", flush=True)
        results.append(result)
    if not args.only:
        import trl
        measure.write_record(OUT, f"RewardTrainer steps (validation/measure_reward.py): peak of live tensor bytes of "
                                  f"one step after a warm-up step, MemTracker; trl {trl.__version__}", results)


if __name__ == "__main__":
    main()
