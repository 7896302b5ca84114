"""Measures one on-policy distillation step as TRL's DistillationTrainer runs it with transformers ``generate()`` as the
rollout, on the CPU under PyTorch's MemTracker, as validation/measure_grpo.py measures a GRPO step.

Dev-only: needs torch, transformers, peft, accelerate and trl (TRL 1.16.0 was read and run). The step is TRL's own code
where it touches memory (trl/trainer/distillation_trainer.py): the rollout as ``_generate_single_turn`` runs it
(``unwrap_model_for_generation``, then ``generate()`` under ``torch.no_grad()``), then for each micro-batch
``DistillationTrainer.compute_loss`` itself, called with the attributes ``DistillationTrainer.__init__`` sets for
DistillationConfig's defaults (beta 1.0, temperature 1.0): ``_forward_redirection`` into ``_compute_loss``, which runs
the student's backbone (``_get_last_hidden_state``), the teacher's backbone under ``torch.no_grad()``, and
``_chunked_divergence_loss`` (``trl.kernels.chunked_divergence.ChunkedDivergenceFunction``: both heads projected on
fp32 tiles, never the logits whole); then ``loss.backward()``, the optimizer step and ``zero_grad(set_to_none=True)``
as the Trainer's training_step does. What it runs:

- rollout: generate() for every micro-batch's rows at once (``_prepare_inputs`` generates once every
  gradient_accumulation_steps micro-batches, L1773-1783), sampling (do_sample, temperature 1, top_k 0, top_p 1)
  ``max_completion_length`` tokens per row (no EOS: every completion runs to the limit), gradient checkpointing off;
- the teacher: a model of its own (``teacher_model``), frozen, in eval mode, loaded by ``create_model_from_path``
  with DistillationConfig's teacher_model_init_kwargs None, so ``dtype=None``, which transformers 5 reads as "auto":
  the checkpoint's dtype (bf16 for these Llama and Qwen configs), whatever the student's;
- the student: full or a PEFT LoRA model (``peft_config``); gradient checkpointing where recompute=full
  (DistillationConfig's default gradient_checkpointing=True), use_reentrant=False, ``enable_input_require_grads()``
  for a PEFT student;
- amp-bf16 (TRL's default for a student it loads by name: fp32 weights, bf16=True): accelerate's prepare_model wraps
  the student's and the teacher's forward in autocast, which generate() calls (a full student generates in bf16; a
  PEFT student's generate() goes through the base model's own forward, unwrapped, in fp32). ``compute_loss`` goes
  through ``_forward_redirection``, which swaps that wrapped forward for ``_compute_loss`` itself: the loss, the
  student's and the teacher's forward run without autocast, each in its weights' dtype. The Trainer adds no autocast
  of its own (transformers Trainer.autocast_smart_context_manager returns a nullcontext: 'We rely on accelerate').

CUDA-like allocation as validation/measure_dpo.py sets it up (512-byte rounding, CUDA's autocast lists), and the
divergence's CUDA path: on a Triton device only the completion's positions are gathered (``compact`` in
``_chunked_divergence_loss``), the tile folds run inside Triton kernels and the projections and fp32 accumulations
are ``torch.mm(..., out_dtype=float32, out=tile)`` and ``torch.addmm(..., out_dtype=float32, out=acc)`` (TRL's
``_project`` and ``_addmm_fp32`` on CUDA), allocating nothing. On the CPU TRL folds and projects with torch ops
that make temporaries a GPU never makes; those run here untracked, writing their results in place into tracked
tensors. The weight rows' casts (``weight[start:end].to(dtype)``) and the gradient tile's cast
(``s_tile.to(s_dtype)``) run tracked, as on CUDA.

Usage:
    python validation/measure_distill.py                 # every case not yet in validation/measured_distill.partial.jsonl
    python validation/measure_distill.py --only lora     # the cases whose label says lora
    python validation/measure_distill.py --write         # validation/measured_distill.json from the cases finished
"""

import argparse
import contextlib
import functools
import json
import sys
import time
import types
from collections import defaultdict
from pathlib import Path

import torch
from torch.distributed._tools.mem_tracker import MemTracker
from torch.utils._python_dispatch import _disable_current_modes

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "validation"))
import measure  # noqa: E402
from cuda_autocast import cuda_autocast  # noqa: E402
from measure_dpo import Phases  # noqa: E402
from measure_grpo import accelerate_autocast  # noqa: E402

OUT = ROOT / "validation" / "measured_distill.json"
PARTIAL = ROOT / "validation" / "measured_distill.partial.jsonl"
TEACHERS = ROOT / "validation" / "distill_teachers"      # the config.json of each teacher of a config of its own

LLAMA = dict(model="llama-3.1-8b", layers="2", hidden="512", heads="8", kv_heads="2", ffn="1408", vocab="32000")
LLAMA4 = dict(model="llama-3.1-8b", layers="4", hidden="768", heads="12", kv_heads="4", ffn="2048", vocab="32000")
QWEN = dict(model="qwen2.5-0.5b", layers="2", hidden="448", heads="7", kv_heads="1", ffn="1216", vocab="32000")
QWEN4 = dict(model="qwen2.5-0.5b", layers="4", hidden="896", heads="14", kv_heads="2", ffn="2432", vocab="32000")
# every head its own keys and values, so that the rollout's KV cache of 4 micro-batches is the step's peak
MHA = dict(model="llama-3.1-8b", layers="4", hidden="512", heads="8", kv_heads="8", ffn="1408", vocab="32000")

DISTILL_KEYS = ("max_completion_length", "teacher")
ARCH_KEYS = ("model", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab")


def case(model, method, precision, recompute, batch, prompt, completion, teacher=None, **extra):
    """pycore's inputs; ``teacher``: the teacher's architecture inputs (None: the student's, TRL's usual set-up)."""
    out = dict(**model, method=method, precision=precision, recompute=recompute, batch=str(batch), seq=str(prompt),
               max_completion_length=str(completion), **extra)
    if teacher is not None:
        out["teacher"] = teacher
    return out


# (label, pycore inputs). batch is per_device_train_batch_size (prompts, one completion each); seq the prompt's tokens.
CASES = [
    ("llama small distill full bf16 b8 p64 c192", case(LLAMA, "distill", "bf16", "none", 8, 64, 192)),
    ("llama small distill full bf16 gc b8 p64 c192", case(LLAMA, "distill", "bf16", "full", 8, 64, 192)),
    ("llama small distill full amp-bf16 b4 p64 c192", case(LLAMA, "distill", "amp-bf16", "none", 4, 64, 192)),
    ("llama small distill full amp-bf16 gc b8 p64 c192", case(LLAMA, "distill", "amp-bf16", "full", 8, 64, 192)),
    ("llama small distill lora qv bf16 gc b8 p64 c256",
     case(LLAMA, "distill-lora", "bf16", "full", 8, 64, 256, lora_targets="qv")),
    ("llama small distill lora all-linear bf16 b8 p64 c192",
     case(LLAMA, "distill-lora", "bf16", "none", 8, 64, 192, lora_targets="all-linear")),
    ("llama small distill lora qv amp-bf16 gc b8 p64 c256",
     case(LLAMA, "distill-lora", "amp-bf16", "full", 8, 64, 256, lora_targets="qv")),
    ("llama small distill full bf16 teacher 4L b8 p64 c192",
     case(LLAMA, "distill", "bf16", "none", 8, 64, 192, teacher=LLAMA4)),
    ("llama small distill lora qv bf16 gc teacher 4L b8 p64 c256",
     case(LLAMA, "distill-lora", "bf16", "full", 8, 64, 256, teacher=LLAMA4, lora_targets="qv")),
    ("qwen small distill full bf16 b16 p32 c128", case(QWEN, "distill", "bf16", "none", 16, 32, 128)),
    ("qwen small distill lora attention amp-bf16 gc teacher 4L b4 p64 c448",
     case(QWEN, "distill-lora", "amp-bf16", "full", 4, 64, 448, teacher=QWEN4, lora_targets="attention")),
    # gradient accumulation: every micro-batch's rows generated at once, then each micro-batch's update
    ("llama MHA distill lora qv bf16 gc b2 ga4 p64 c448",
     case(MHA, "distill-lora", "bf16", "full", 2, 64, 448, lora_targets="qv", microbatches="4")),
    ("qwen small distill full bf16 gc b2 ga2 p64 c192",
     case(QWEN, "distill", "bf16", "full", 2, 64, 192, microbatches="2")),
]


def student_method(inputs):
    return {"distill": "full", "distill-lora": "lora"}[inputs["method"]]


def cuda_like_divergence():
    """The divergence's CUDA path on the CPU (the module docstring)."""
    import trl.kernels.chunked_divergence as chunked
    import trl.trainer.distillation_trainer as trainer

    trainer._use_triton = lambda device: True          # compact: only the completion's positions

    def untracked(fn):
        def run(*args, **kwargs):
            with _disable_current_modes():
                return fn(*args, **kwargs)
        return run

    def project(tile, hidden_chunk, weight, bias, start, end, dtype):
        # TRL's _project: the weight rows cast (a copy only where the dtype differs), then the fp32 product into the
        # tile, which CUDA's torch.mm(out_dtype=float32, out=tile) writes without copies
        w = weight[start:end].to(dtype).t()
        untracked(lambda: torch.mm(hidden_chunk.float(), w.float(), out=tile))()
        if bias is not None:
            tile.add_(bias[start:end].float())
    chunked._project = project
    for name in ("_stats_tile", "_jsd_tile", "_backward_tile", "_addmm_fp32"):
        setattr(chunked, name, untracked(getattr(chunked, name)))


def frozen(model):
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def build(inputs):
    """The student as plain fine-tuning builds it (a PEFT model for distill-lora) and the teacher in the checkpoint's
    dtype (bf16), frozen; under amp-* both forwards wrapped in autocast as accelerate's prepare_model does."""
    plain = {k: v for k, v in inputs.items() if k not in DISTILL_KEYS}
    plain["method"] = student_method(inputs)
    values, arch, model = measure.build(plain)
    # measure.hf_config turns the cache off for training; a checkpoint's config keeps use_cache=True (generate())
    model.config.use_cache = True
    model.generation_config.use_cache = True
    teacher_inputs = {**{k: inputs[k] for k in ARCH_KEYS}, **inputs.get("teacher", {})}
    teacher_inputs.update(method="full", precision="bf16", recompute="none", batch=inputs["batch"], seq=inputs["seq"])
    _, teacher_arch, teacher = measure.build(teacher_inputs)
    frozen(teacher)
    if plain["method"] == "lora":
        model = measure.with_lora(model, values)
    model.train()
    if values["recompute"] == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if plain["method"] == "lora":
            model.enable_input_require_grads()
    if values["precision"].startswith("amp-"):
        accelerate_autocast(model)
        accelerate_autocast(teacher)
    return values, arch, model, teacher, teacher_arch


def trainer(model, teacher, steps):
    """The attributes DistillationTrainer.compute_loss, _compute_loss and _get_last_hidden_state read, as
    DistillationTrainer.__init__ sets them for DistillationConfig's defaults (beta 1.0, temperature 1.0)."""
    from accelerate import Accelerator
    from trl.models.utils import _ForwardRedirection
    from trl.trainer.distillation_trainer import DistillationTrainer

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    distill = types.SimpleNamespace(
        model=model, teacher_model=teacher, accelerator=Accelerator(cpu=True), beta=1.0, temperature=1.0,
        args=types.SimpleNamespace(gradient_checkpointing_kwargs={"use_reentrant": False},
                                   ds3_gather_for_generation=True, gradient_accumulation_steps=steps,
                                   report_to=[]),
        state=types.SimpleNamespace(global_step=0),
        _forward_redirection=_ForwardRedirection(), _is_vlm=False, _metrics={"train": defaultdict(list)},
        model_kwarg_keys=__import__("inspect").signature(base.forward).parameters.keys())
    for name in ("_compute_loss", "_get_last_hidden_state"):
        setattr(distill, name, functools.partial(getattr(DistillationTrainer, name), distill))
    return distill


def rollout(distill, values, arch, completion):
    """DistillationTrainer._generate_single_turn's transformers path: unwrap_model_for_generation (checkpointing off),
    generate() under no_grad for every micro-batch's rows at once."""
    from transformers import GenerationConfig
    from trl.models.utils import unwrap_model_for_generation

    rows = values["batch"] * values["microbatches"]
    prompt_ids = torch.randint(1, arch.vocab, (rows, values["seq"]))
    config = GenerationConfig(max_new_tokens=completion, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                              min_p=None, repetition_penalty=1.0, pad_token_id=0, eos_token_id=None,
                              bos_token_id=None, disable_compile=True)
    with unwrap_model_for_generation(distill.model, distill.accelerator,
                                     gradient_checkpointing_kwargs=distill.args.gradient_checkpointing_kwargs) as \
            unwrapped, torch.no_grad():
        out = unwrapped.generate(input_ids=prompt_ids, attention_mask=torch.ones_like(prompt_ids),
                                 generation_config=config)
    return prompt_ids, out[:, prompt_ids.size(1):].contiguous()


def backbone(model):
    """The module _get_last_hidden_state calls: the causal LM's base_model (its decoder stack)."""
    if hasattr(model, "get_base_model"):
        model = model.base_model.model
    return model.base_model


def step(distill, values, arch, optimizer, completion, phases=None):
    """Rollout, then for each micro-batch compute_loss (student forward, teacher forward, divergence), backward; the
    optimizer step and zero_grad."""
    from trl.trainer.distillation_trainer import DistillationTrainer

    def mark(name):
        if phases:
            phases.mark(name)
    prompt_ids, completion_ids = rollout(distill, values, arch, completion)
    mark("rollout")
    prompt_mask, completion_mask = torch.ones_like(prompt_ids), torch.ones_like(completion_ids)
    generated = {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
                 "completion_mask": completion_mask}
    batch = values["batch"]
    for start in range(0, prompt_ids.size(0), batch):
        if phases and start:
            phases.tracker.reset_mod_stats()
        inputs = {k: v[start:start + batch] for k, v in generated.items()}
        inputs["num_items_in_batch"] = completion_mask.sum()
        hooks = _phase_hooks(phases, distill) if phases else ()
        loss = DistillationTrainer.compute_loss(distill, distill.model, inputs)
        for handle in hooks:
            handle.remove()
        mark("divergence")
        loss.backward()
        del loss, inputs
        mark("backward")
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    mark("optimizer step")


def _phase_hooks(phases, distill):
    """Marks around the student's backbone forward (with grad) and the teacher's (no_grad)."""
    def before(mod, args, kwargs):
        phases.mark("before")

    def after_student(mod, args, kwargs, output):
        phases.mark("forward")

    def after_teacher(mod, args, kwargs, output):
        phases.mark("teacher forward")
    student, teacher = backbone(distill.model), backbone(distill.teacher_model)
    return (student.register_forward_pre_hook(before, with_kwargs=True),
            student.register_forward_hook(after_student, with_kwargs=True),
            teacher.register_forward_hook(after_teacher, with_kwargs=True))


def run_case(label, inputs):
    torch.manual_seed(0)
    started = time.time()
    values, arch, model, teacher, teacher_arch = build(inputs)
    completion = int(inputs["max_completion_length"])
    plain = {k: v for k, v in inputs.items() if k not in DISTILL_KEYS} | {"method": "full"}
    impl = measure.optimizer_impl(plain)
    optimizer = measure.make_optimizer([p for p in model.parameters() if p.requires_grad], values["optimizer"], impl)
    distill = trainer(model, teacher, values["microbatches"])
    with cuda_autocast(True):
        step(distill, values, arch, optimizer, completion)            # warm-up: optimizer state
    tracker = MemTracker()
    track = tracker._track_module_params_and_buffers
    tracker._track_module_params_and_buffers = lambda module, install_grad_hooks=True: track(
        module, install_grad_hooks and student_method(inputs) == "full" and module is not teacher)
    tracker.track_external(model, optimizer, teacher)
    # generate() and the teacher call each module many times under no_grad; MemTracker's per-module statistics allow
    # one call, and are not read here: its module hooks skip no_grad forwards (every allocation is still counted)
    for name in ("_pre_fw_hook", "_post_fw_hook"):
        hook = getattr(tracker, name)
        setattr(tracker, name, lambda *args, hook=hook: hook(*args) if torch.is_grad_enabled() else None)
    for name in ("_pre_bw_hook", "_post_bw_hook"):
        hook = getattr(tracker, name)
        setattr(tracker, name, lambda module, args, hook=hook: hook(module, args)
                if module in tracker.memory_tracking else None)
    phases = Phases(tracker)
    with tracker, cuda_autocast(True):
        phases.mark("before")
        step(distill, values, arch, optimizer, completion, phases)
    overall = max((p for name, p in phases.peaks.items() if name != "before"), key=lambda p: p["Total"])
    return {"label": label, "inputs": inputs, "tensor_mode": "real", "optimizer_impl": impl,
            "params": sum(p.numel() for p in model.parameters()),
            "teacher_params": sum(p.numel() for p in teacher.parameters()),
            "teacher_dtype": str(next(teacher.parameters()).dtype).removeprefix("torch."),
            "peak_bytes": overall["Total"], "peak_breakdown": {k: v for k, v in overall.items() if k != "Total"},
            "phase_peaks": {name: p["Total"] for name, p in phases.peaks.items() if name != "before"},
            "phase_breakdown": {name: {k: v for k, v in p.items() if k != "Total"}
                                for name, p in phases.peaks.items() if name != "before"},
            "seconds": round(time.time() - started, 1)}


def with_teacher_config(result):
    """A case whose teacher has a config of its own gets that config.json, written to validation/distill_teachers/
    as the teacher was built (pycore reads it as teacher=PATH), and its path in ``teacher_config``."""
    if "teacher" not in result["inputs"]:
        return result
    from pycore.inputs import frameworks, schema
    from pycore.memory.setup import resolve_architecture

    inputs = {**{k: result["inputs"][k] for k in ARCH_KEYS}, **result["inputs"]["teacher"], "precision": "bf16"}
    values = frameworks.apply(schema.parse(measure.compare.measured_inputs(inputs)))
    arch = resolve_architecture(values)
    config = measure.hf_config(arch, values["attention"], values["model"]).to_dict()
    config.update(architectures=[arch.hf_class], dtype="bfloat16", torch_dtype="bfloat16", use_cache=True)
    config.pop("_attn_implementation_autoset", None)
    name = f"{values['model']}-{arch.layers}L-{arch.hidden}.json"
    path = TEACHERS / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(config, indent=1, sort_keys=True, default=str) + "\n")
    return {**result, "teacher_config": str(path.relative_to(ROOT))}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="run only cases whose label contains this text (a|b: either)")
    parser.add_argument("--write", action="store_true", help="write validation/measured_distill.json from the cases "
                                                             "finished so far (PARTIAL), in CASES' order")
    args = parser.parse_args()
    if args.write:
        import accelerate
        import peft
        import trl
        done = {r["label"]: r for r in map(json.loads, PARTIAL.read_text().splitlines())}
        results = [with_teacher_config(done[label]) for label, _ in CASES if label in done]
        measure.write_record(OUT, f"Peak tensor bytes of one on-policy distillation step as TRL {trl.__version__}'s "
                             "DistillationTrainer runs it with generate() as the rollout (rollout, then per micro-batch "
                             "compute_loss: the student's forward, the teacher's under no_grad, the chunked "
                             "divergence; backward; AdamW step), recorded by validation/measure_distill.py", results)
        record = json.loads(OUT.read_text())
        record = {**{k: v for k, v in record.items() if k != "cases"}, "trl": trl.__version__,
                  "peft": peft.__version__, "accelerate": accelerate.__version__, "cases": record["cases"]}
        OUT.write_text(json.dumps(record, indent=1) + "\n")
        return
    cuda_like_divergence()
    done = {json.loads(line)["label"] for line in PARTIAL.read_text().splitlines()} if PARTIAL.exists() else set()
    for label, inputs in CASES:
        if args.only and not any(word in label for word in args.only.split("|")) or label in done:
            continue
        result = run_case(label, inputs)
        phases = "  ".join(f"{k} {v / 2**20:7.1f}" for k, v in result["phase_peaks"].items())
        print(f"{label:64s} peak {result['peak_bytes'] / 2**20:8.1f} MiB  [{phases}]  {result['seconds']:5.1f}s",
              flush=True)
        with PARTIAL.open("a") as handle:
            handle.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
