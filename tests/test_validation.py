"""The estimate against real PyTorch peaks recorded by validation/measure.py (validation/measured.json)."""

import json
import statistics
import sys
from pathlib import Path

import pytest

from pycore import estimate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import compare  # noqa: E402

RECORD = json.loads((ROOT / "validation" / "measured.json").read_text())
CASES = RECORD["cases"]


def test_enough_cases_and_families():
    assert len(CASES) >= 40
    families = {case["inputs"]["model"].split("-")[0] for case in CASES}
    assert {"llama", "mistral", "qwen2.5", "gemma", "gpt2", "mixtral", "bert"} <= families
    precisions = {case["inputs"].get("precision") for case in CASES}
    assert {"fp32", "amp-bf16", "amp-fp16", "bf16-master", "fp16-master", "bf16", "fp16"} <= precisions


TRAINING = [c for c in CASES if c["inputs"].get("mode") != "infer"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["label"])
def test_peak_within_10_percent_of_measured(case):
    estimated = estimate(compare.measured_inputs(case["inputs"])).peak_bytes
    assert abs(estimated - case["peak_bytes"]) <= 0.10 * case["peak_bytes"]


def test_median_error_within_3_percent():
    errors = [abs(estimate(compare.measured_inputs(c["inputs"])).peak_bytes - c["peak_bytes"]) / c["peak_bytes"] for c in CASES]
    assert statistics.median(errors) <= 0.03


@pytest.mark.parametrize("case", TRAINING, ids=lambda c: c["label"])
def test_weights_and_optimizer_state_exact_to_a_tenth_of_a_percent(case):
    # MemTracker's categories at the peak: Parameter is the weights; Optstate is the optimizer state (plus
    # the step's temporaries when the peak is in the step); Other holds the fp32 master weights.
    result = estimate(compare.measured_inputs(case["inputs"])).as_dict()
    measured, c = case["peak_breakdown"], result["components"]
    assert measured["Parameter"] == pytest.approx(c["weights"], rel=1e-3)
    if result["peak_phase"] == "backward":
        assert measured.get("Optstate", 0) == pytest.approx(c["optimizer"], rel=1e-3, abs=2**20)
        assert measured.get("Other", 0) == pytest.approx(c.get("master_weights", 0), rel=1e-3, abs=2**20)
    if result["peak_phase"] == "optimizer" and not c.get("master_weights", 0):
        assert measured["Gradient"] == pytest.approx(c.get("gradients", 0), rel=1e-3)


def test_validation_doc_is_current():
    record, table = compare.rows()
    assert (ROOT / "docs" / "validation.md").read_text() == compare.markdown(record, table)


FSDP = json.loads((ROOT / "validation" / "measured_fsdp.json").read_text())["cases"]


@pytest.mark.parametrize("case", FSDP, ids=lambda c: c["label"])
def test_fsdp_peak_within_10_percent_of_measured(case):
    # validation/measured_fsdp.json: FSDP2 rank 0 of N under FSDPMemTracker with the fake process group.
    estimated = estimate(compare.measured_inputs(case["inputs"])).peak_bytes
    assert abs(estimated - case["peak_bytes"]) <= 0.10 * case["peak_bytes"]


@pytest.mark.parametrize("label,query,theirs", compare.TORCHTITAN, ids=[t[0] for t in compare.TORCHTITAN])
def test_torchtitan_published_memory_within_10_percent(label, query, theirs):
    # torchtitan docs/performance.md, Llama 3.1 on H100 (Tables 2 and 4): max reserved GiB per GPU.
    from urllib.parse import parse_qsl
    ours = estimate(dict(parse_qsl(query))).reserved_bytes / 2**30
    assert abs(ours - theirs) <= 0.10 * theirs


# validation/measured_pipeline.json: validation/measure_pipeline.py runs one stage of torch.distributed.pipelining's
# Schedule1F1B on the fake process group (rank k of pp) under MemTracker; each case is one stage.
PIPELINE = json.loads((ROOT / "validation" / "measured_pipeline.json").read_text())["cases"]


def _stage_estimate(case):
    return estimate(compare.measured_inputs(case["inputs"])).stages[case["stage"]]


@pytest.mark.parametrize("case", PIPELINE, ids=lambda c: c["label"])
def test_pipeline_stage_within_10_percent_of_measured(case):
    estimated = _stage_estimate(case)["peak_bytes"]
    assert abs(estimated - case["peak_bytes"]) <= 0.10 * case["peak_bytes"]


def test_pipeline_median_error_within_3_percent():
    errors = [abs(_stage_estimate(c)["peak_bytes"] - c["peak_bytes"]) / c["peak_bytes"] for c in PIPELINE]
    assert statistics.median(errors) <= 0.03


@pytest.mark.parametrize("case", PIPELINE, ids=lambda c: c["label"])
def test_pipeline_stage_holds_the_layers_pycore_places_on_it(case):
    # the measured stage was split as pycore.memory.parallel.stages splits the model: its weights are the same bytes
    assert case["peak_breakdown"]["Parameter"] == _stage_estimate(case)["components"]["weights"]


def test_pipeline_reports_the_stage_measured_most_loaded():
    by_setup = {}
    for case in PIPELINE:
        by_setup.setdefault(case["label"].rsplit(" stage ", 1)[0], []).append(case)
    for cases in by_setup.values():
        measured_worst = max(cases, key=lambda c: c["peak_bytes"])["stage"]
        assert estimate(compare.measured_inputs(cases[0]["inputs"])).stage == measured_worst


def _stage_pools(inputs):
    """Every pipeline stage's pools, first to last."""
    from pycore.inputs import frameworks, schema
    from pycore.memory import parallel, setup, training
    resolved = setup.resolve(frameworks.apply(schema.parse(inputs)))
    return [training.stage_estimate(resolved, stage)["pools"] for stage in parallel.stages(resolved.arch, resolved.layout)]


def test_torch_pipelining_keeps_receive_buffers_and_the_last_stages_logits():
    # validation/measured_pipeline.json: under torch.distributed.pipelining each stage keeps a receive buffer per
    # micro-batch for what it receives (activations unless first, gradients unless last), holds its output for
    # the micro-batches in flight, and the last stage's logits stay through its backward (PipelineStage.fwd_cache).
    # Megatron's last stage returns the loss and allocates receive buffers as it receives
    # (pycore.inputs.frameworks.OWN_PIPELINE): neither is added there.
    base = {"model": "llama-3.1-8b", "precision": "bf16", "pp": "4", "microbatches": "8", "batch": "1", "seq": "4096"}
    torchtitan, megatron = (_stage_pools({**base, "framework": name}) for name in ("torchtitan", "megatron"))
    one = 4096 * 4096 * 2                                  # tokens × hidden in bf16
    assert sum(p.bytes for p in torchtitan[1] if p.group == "pipeline_buffers") == (8 + 8 + 3) * one
    assert sum(p.bytes for p in torchtitan[3] if p.group == "pipeline_buffers") == 8 * one
    assert "backward start" in next(p for p in torchtitan[3] if p.key == "logits").moments
    assert not [p for p in megatron[1] if p.group == "pipeline_buffers"]
    assert "backward start" not in next(p for p in megatron[3] if p.key == "logits").moments


@pytest.mark.parametrize("pp,interleave,microbatches,expected", [
    (4, 1, 8, [4, 3, 2, 1]), (4, 1, 2, [2, 2, 2, 1]),
    # interleaved: 2·(p − i − 1) + (v − 1)·p warm-up chunk forwards and one more, at most v per micro-batch
    (4, 2, 8, [5.5, 4.5, 3.5, 2.5]), (2, 2, 4, [2.5, 1.5]), (4, 2, 4, [4, 4, 3.5, 2.5])])
def test_micro_batches_in_flight_per_stage(pp, interleave, microbatches, expected):
    # Megatron-LM forward_backward_pipelining_with_interleaving's num_warmup_microbatches, as torch.distributed
    # .pipelining's ScheduleInterleaved1F1B (_get_warmup_ops) runs it; validation/measured_pipeline.json's
    # interleaved cases (pp 2 and 4, 2 chunks) put every measured stage within 3% with these counts
    from pycore.memory import parallel
    from pycore.model.catalog import architecture
    layout = parallel.Layout(pp=pp, microbatches=microbatches, interleave=interleave)
    assert [s.in_flight for s in parallel.stages(architecture("llama-3.1-8b"), layout)] == expected


# validation/measure_hybrid.py (validation/measured_hybrid.json): generate() and training steps of small hybrid configs
HYBRID = compare.hybrid_rows()[1]


@pytest.mark.parametrize("case", HYBRID, ids=[c["label"] for c in HYBRID])
def test_hybrid_weights_and_cache_exact(case):
    # weights, the attention layers' KV cache and the conv/recurrent states: to the allocator's 512-byte rounding of
    # every tensor (and Falcon-H1's few buffers), a tenth of a percent
    for measured, estimated in case["pairs"]:
        assert abs(measured - estimated) <= 0.001 * measured


def test_hybrid_training_within_3_percent_median_and_10_worst():
    # the scan layers' saved tensors by pycore/memory/scan_activations.py, and Mamba-1's reference-scan backward
    # gradients (Jamba, -12.5% without them); the worst is Qwen3-Next under amp (-6.6%), docs/validation.md
    errors = [abs(c["error"]) for c in HYBRID if " train " in c["label"]]
    assert statistics.median(errors) <= 0.03 and max(errors) <= 0.10


def test_hybrid_serving_within_3_percent_median_and_30_worst():
    # the reference scan's prefill transient is a fit of these same cases (not an independent check); Nemotron-H
    # is over by up to 27%, on the safe side
    errors = [c["error"] for c in HYBRID if " infer " in c["label"]]
    assert statistics.median(abs(e) for e in errors) <= 0.03 and min(errors) >= -0.10 and max(errors) <= 0.30


# validation/measure_lora.py (validation/measured_lora.json): LoRA steps through PEFT 0.21 on small Llama and Qwen2
# configs, rank 8-64, q/v, attention and all-linear targets, bf16, amp-bf16 and fp32, with and without lora_dropout
LORA = compare.lora_rows()[1]


@pytest.mark.parametrize("case", LORA, ids=[c["label"] for c in LORA])
def test_lora_peak_within_10_percent_of_measured(case):
    assert abs(case["error"]) <= 0.10


def test_lora_median_error_within_3_percent():
    assert statistics.median(abs(c["error"]) for c in LORA) <= 0.03


PLAIN_LORA = [c for c in LORA if not c["dropout"] and "dora" not in c["label"]]   # DoRA's hooks see forward-only tensors


@pytest.mark.parametrize("case", PLAIN_LORA, ids=[c["label"] for c in PLAIN_LORA])
def test_lora_saved_per_layer_as_peft_keeps_it(case):
    # what a block keeps for backward (saved_tensors_hooks, the blocks' mean) against the per-layer terms: PEFT's
    # per-layer fp32 (or autocast 16-bit) input copies, lora_A's outputs, no normalised tensor of a frozen norm, the
    # first block's input norm keeping nothing; within 1.1% measured, 2% held
    assert abs(case["saved_error"]) <= 0.02


def test_lora_cases_cover_the_targets_precisions_and_dropout():
    labels = " ".join(c["label"] for c in LORA)
    for word in ("llama", "qwen2", " qv ", " attention ", " all-linear ", " bf16 ", " amp-bf16 ", "dropout 0 ",
                 "dropout 0.05", "recompute=full", " r8 ", " r16 ", " r64 "):
        assert word in labels, word


# validation/measure_dpo.py (validation/measured_dpo.json): one step of TRL 1.16's DPOTrainer (its own _compute_loss,
# then backward and AdamW) on small Llama and Qwen2 configs in bf16 and amp-bf16: full and LoRA policies, a frozen reference copy,
# the base with adapters disabled, precomputed reference log-probs, with and without gradient checkpointing
DPO = compare.dpo_rows()[1]


@pytest.mark.parametrize("case", DPO, ids=[c["label"] for c in DPO])
def test_dpo_peak_within_10_percent_of_measured(case):
    assert abs(case["error"]) <= 0.10


def test_dpo_median_error_within_3_percent():
    assert statistics.median(abs(c["error"]) for c in DPO) <= 0.03


@pytest.mark.parametrize("case", DPO, ids=[c["label"] for c in DPO])
def test_dpo_reference_forward_as_measured(case):
    # the reference forward under no_grad: the policy's saved activations beside the reference's fused head or, in the
    # wide-MLP cases, one layer's MLP; within 5% of the phase's measured peak (at most +4.0% measured: the prompt's
    # tokens the estimate counts in the head's tile)
    if "reference forward" in case["phases"]:
        measured, estimated = case["phases"]["reference forward"]
        assert abs(estimated - measured) <= 0.05 * measured
    else:
        assert "precomputed" in case["label"]


def test_dpo_cases_cover_the_policies_and_references():
    labels = " ".join(c["label"] for c in DPO)
    for word in ("llama", "qwen", " full ", " lora ", "precomputed", " gc ", "wide-MLP", " bf16 ", " amp-bf16 "):
        assert word in labels, word


# validation/measure_kto.py (validation/measured_kto.json): one step of TRL 1.16's KTOTrainer (its own _compute_loss:
# the policy's no_grad KL forward, its forward, the reference's two no_grad forwards; then backward and AdamW), with
# measure_dpo.py's set-up
KTO = compare.kto_rows()[1]


@pytest.mark.parametrize("case", KTO, ids=[c["label"] for c in KTO])
def test_kto_peak_within_10_percent_of_measured(case):
    assert abs(case["error"]) <= 0.10


def test_kto_median_error_within_3_percent():
    assert statistics.median(abs(c["error"]) for c in KTO) <= 0.03


@pytest.mark.parametrize("case", KTO, ids=[c["label"] for c in KTO])
def test_kto_no_grad_forwards_as_measured(case):
    # the KL forward (weights, optimizer state, reference, one no_grad pass) and the reference forward (the policy's
    # saved activations beside it): within 5% of each phase's measured peak (at most +3.9% measured: the prompt's
    # tokens the estimate counts in the head's tile)
    for phase in ("KL forward", "reference forward"):
        if phase not in case["phases"]:
            assert phase == "reference forward" and "precomputed" in case["label"]
            continue
        measured, estimated = case["phases"][phase]
        assert abs(estimated - measured) <= 0.05 * measured, phase


def test_kto_cases_cover_the_policies_and_references():
    labels = " ".join(c["label"] for c in KTO)
    for word in ("llama", "qwen", " full ", " lora ", "precomputed", " gc ", "wide-MLP", " bf16 ", " amp-bf16 ",
                 " fp32 "):
        assert word in labels, word


def test_dora_keeps_the_outputs_it_multiplies():
    # validation/measured_lora.json's dora_study: DoRA's bytes a token beyond LoRA's in the second block, measured at
    # hidden 512 (q 512 and v 128 outputs; all-linear 512 + 128 + 128 + 512 + 1,408 + 1,408 + 512), bf16 and amp-bf16
    from pycore.memory import finetune
    from pycore.model.architecture import Architecture
    study = json.loads((ROOT / "validation" / "measured_lora.json").read_text())["dora_study"]
    arch = Architecture(name="llama 2L", layers=2, hidden=512, heads=8, kv_heads=2, ffn=1408, vocab=8000)
    for lora, dora in zip(study[::2], study[1::2]):
        amp = dora["precision"] == "amp-bf16"
        assert dora["per_token_total"] - lora["per_token_total"] == \
            finetune.dora_outputs(arch, dora["targets"], 4, 2, amp)


# validation/measure_distill.py (validation/measured_distill.json): one on-policy distillation step of TRL 1.16's
# DistillationTrainer (the generate() rollout, then its own compute_loss: the student's forward, the teacher's under
# no_grad, the chunked divergence; backward, AdamW) on small Llama and Qwen2 configs: full and LoRA students, bf16 and
# amp-bf16, with and without checkpointing, teachers of the student's config and of a larger one, accumulation
DISTILL = compare.distill_rows()[1]


@pytest.mark.parametrize("case", DISTILL, ids=[c["label"] for c in DISTILL])
def test_distill_peak_within_10_percent_of_measured(case):
    assert abs(case["error"]) <= 0.10


def test_distill_median_error_within_3_percent():
    assert statistics.median(abs(c["error"]) for c in DISTILL) <= 0.03


@pytest.mark.parametrize("case", DISTILL, ids=[c["label"] for c in DISTILL])
def test_distill_phases_as_measured(case):
    # every phase a moment of its own: the rollout, the student's forward, the teacher's, the divergence, backward and
    # the optimizer step each within 10% of its measured peak; and the phase measured as the step's peak is the
    # estimate's too, or within 1% of it (two phases a few hundred KiB apart measure either way)
    for name, (measured, estimated) in case["phases"].items():
        assert abs(estimated - measured) <= 0.10 * measured, name
    assert case["phases"][case["measured_phase"]][1] >= 0.99 * case["estimated"]


def test_distill_cases_cover_students_precisions_teachers_and_accumulation():
    labels = " ".join(c["label"] for c in DISTILL)
    for word in ("llama", "qwen", " full ", " lora ", " gc ", " bf16 ", " amp-bf16 ", "teacher 4L", " ga"):
        assert word in labels, word
    assert len(DISTILL) >= 12


# validation/measure_cuda.py on an H200 (validation/measured_cuda.json): max_memory_allocated of the same steps with
# CUDA's own kernels; below 1 GiB the caching allocator's rounding of blocks (unsplit remainders of up to 1 MiB
# count as allocated) weighs more than any modelled term.
CUDA_CASES = compare.cuda_rows()[1]


@pytest.mark.parametrize("row", [r for r in CUDA_CASES if r["measured"] >= 2**30], ids=lambda r: r["label"])
def test_on_a_gpu_within_10_percent_of_max_memory_allocated(row):
    assert abs(row["error"]) <= 0.10


def test_on_a_gpu_median_within_3_percent():
    assert statistics.median(abs(r["error"]) for r in CUDA_CASES) <= 0.03


# validation/measure_cuda_families.py on an H200 (validation/measured_cuda_families.json): the hybrid and
# vision-language families' small configs, the same models and inputs as their CPU records, CUDA's own kernels.
CUDA_FAMILY_CASES = compare.cuda_families_rows()[1]


def test_cudnns_conv3d_allocates_channels_last_copies_only_when_the_patch_embedding_is_128_wide_in_bf16():
    # validation/probe_conv3d.py on the same H200 (validation/measured_conv3d.json): the Qwen towers' Conv3d alone, at
    # the small configs' widths (128, 256) and the published towers' (1,024, 1,152, 1,280)
    record, off = compare.conv3d_probe()
    assert len(record["cases"]) >= 60 and not off
    assert all(c["blocks"] == [c["output_bytes"]] for c in record["cases"]
               if c["channels"] >= 1024 and c["dtype"] == "bfloat16")
    assert sum(c["channels"] >= 1024 and c["dtype"] == "float32" for c in record["cases"]) >= 6


@pytest.mark.parametrize("kind", sorted(compare.CUDA_FAMILY_KINDS))
def test_on_a_gpu_each_family_kind_within_3_percent_median(kind):
    errors = [abs(r["error"]) for r in CUDA_FAMILY_CASES if r["kind"] == kind]
    assert len(errors) >= 6 and statistics.median(errors) <= 0.03


@pytest.mark.parametrize("row", CUDA_FAMILY_CASES, ids=lambda r: r["label"])
def test_on_a_gpu_each_family_case_within_10_percent_or_short_by_less_than_cudnns_conv3d(row):
    # Qwen2.5-VL's 896x896 and Qwen3.5's and Qwen3-VL's 640x640 generate() peak inside the 128-wide patch embedding's
    # Conv3d, where cuDNN holds a channels-last copy of the patches and filters (compare.conv3d_copies, which pycore
    # does not count: in bf16 no published tower's width makes one): what the estimate lacks must be under that copy
    assert row["params_match"]
    if abs(row["error"]) > 0.10:
        case = next(c for c in json.loads(compare.CUDA_FAMILIES.read_text())["cases"] if c["label"] == row["label"])
        conv = compare.patch_conv(case)
        assert conv and 0 < row["measured"] - row["estimated"] < compare.conv3d_copies(*conv)


def test_on_a_gpu_whole_hybrid_and_vision_language_models_within_1_percent():
    # Gemma 3 27B, Qwen2.5-VL-7B (generate() with a 1,288x728 image, and LoRA training), Qwen3.5-9B, LLaVA-1.5-7B,
    # Nemotron-Nano-12B-v2, Granite 4.0-H-350M, Falcon-H1-0.5B built from their config.json on the H200
    # (validation/measured_cuda_families.json): -0.6% to +0.6% when recorded; Nemotron's and Falcon-H1's prefills were
    # -3.4% and -6.6% before Mamba-2's reference scan was read off its code. 16,384-token prompts through Qwen3.5-9B's
    # and Qwen3-Next's DeltaNet layers and 2,048 through Jamba's Mamba-1 layers: +0.8% to +1.2%. Training steps of
    # Qwen3.5-9B's, Qwen3-Next's and Nemotron-Nano-12B-v2's first layers at full width: -0.8% to -0.0%. Qwen3-Next's
    # 16,384-token prefill with fla: -0.5% (+7.1% while its MoE's routed outputs were taken in fp32). Qwen3-VL-4B's
    # generate() with a 4,096-token prompt and an image, a full training step and LoRA training, and Qwen3-VL-30B-A3B's
    # generate(): -0.4% to +0.6% when recorded; LLaVA-v1.6-Mistral-7B's generate() and LoRA training with a 1,280x720
    # image's five crops: -0.0% and +0.1%; InternViT-6B's generate() over two 896x672 images' 26 tiles: -0.8%
    rows = [r for r in CUDA_FAMILY_CASES if r["kind"] == "whole"]
    assert len(rows) == 22 and all(abs(r["error"]) <= 0.015 for r in rows)


def test_a_gpu_step_counts_the_cublas_workspaces_and_fp32_grouped_query_math_attention():
    # qwen2.5-0.5b fp32 b4s1024 on the H200 (validation/measured_cuda_explain.txt): 266 MiB a layer of SDPA's math
    # kernel; -17.7% before it and the two 32 MiB cuBLAS workspaces were counted
    row = next(r for r in CUDA_CASES if r["label"] == "qwen2.5-0.5b fp32 adamw b4s1024")
    assert abs(row["error"]) <= 0.01
