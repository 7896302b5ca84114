"""On-policy distillation as TRL 1.16's DistillationTrainer runs it (pycore/memory/distillation.py): its inputs and
defaults, the teacher, the moments of a step and what each holds. Sources: huggingface/trl v1.16.0
trl/trainer/distillation_trainer.py, distillation_config.py, trl/kernels/chunked_divergence.py; the measured steps are
in tests/test_validation.py (validation/measured_distill.json)."""

import pytest

from pycore import estimate
from pycore.base.errors import FieldError
from pycore.inputs import applies, frameworks
from pycore.inputs.schema import DEFAULTS, parse
from pycore.memory.precision import POLICIES
from pycore.memory.setup import resolve
from pycore.model.architecture import count_parameters
from pycore.model.catalog import architecture

BASE = {"model": "llama-3.2-1b", "method": "distill", "batch": "4", "seq": "256", "max_completion_length": "512"}


def pools(result):
    return {p.key: p for p in result.pools}


def test_defaults_are_distillation_configs():
    # DistillationConfig: max_completion_length 512 (distillation_config.py L223-226), gradient_checkpointing True and
    # bf16 True (L159-160) over a student create_model_from_path loads in float32 (trainer L347-361): amp-bf16
    assert DEFAULTS["max_completion_length"] == 512 and DEFAULTS["teacher"] == "auto"
    values = frameworks.apply(parse({"model": "llama-3.2-1b", "method": "distill"}))
    assert values["recompute"] == "full" and values["precision"] == "amp-bf16"
    # teacher_model_init_kwargs None: dtype None, transformers 5's "auto", the checkpoint's own (bf16 for Llama 3.2)
    assert resolve(parse(BASE)).finetune.teacher_dtype == "bf16"


def test_the_update_is_not_autocast_but_generate_is():
    # _forward_redirection (trl/models/utils.py L345-387) calls _compute_loss in place of accelerate's autocast-wrapped
    # forward: under amp-bf16 the update computes in fp32 (validation/measured_distill.json's amp cases, within 1%)
    setup = resolve(parse({**BASE, "precision": "amp-bf16"}))
    assert not setup.policy.autocast and setup.policy.act == "fp32"
    assert setup.finetune.generate_policy == POLICIES["amp-bf16"]
    amp, fp32 = estimate({**BASE, "precision": "amp-bf16"}), estimate({**BASE, "precision": "fp32"})
    for moment in ("forward end", "teacher forward", "divergence", "backward start", "optimizer step"):
        assert amp.moments[moment] == fp32.moments[moment]
    # a full student generates under autocast: its 16-bit weight copies in the rollout, none in fp32
    assert "rollout_autocast_copies" in pools(amp) and "rollout_autocast_copies" not in pools(fp32)


def test_a_step_is_a_rollout_then_each_phase_of_the_update():
    result = estimate(BASE)
    assert list(result.moments)[:5] == ["rollout, prefill", "rollout, decode", "forward end", "teacher forward",
                                        "divergence"]
    by_key = pools(result)
    assert by_key["teacher_weights"].group == "teacher_model" and by_key["teacher_forward"].moments == ("teacher forward",)
    assert by_key["weights"].label.startswith("Student")
    # the teacher is resident through the rollout and every moment of the update
    assert set(result.moments) <= set(by_key["teacher_weights"].moments)
    # no logits or cross-entropy: the divergence's tiles in their place
    assert "logits" not in by_key and "divergence_forward" in by_key


def test_teacher_weights_are_its_parameters_in_its_dtype():
    teacher = architecture("llama-3.1-8b")
    result = estimate({**BASE, "teacher": "llama-3.1-8b"})
    assert pools(result)["teacher_weights"].bytes == count_parameters(teacher).total * 2       # bf16 checkpoint
    fp32 = estimate({**BASE, "teacher": "llama-3.1-8b", "teacher_dtype": "fp32"})
    assert pools(fp32)["teacher_weights"].bytes == count_parameters(teacher).total * 4
    # teacher=auto: the student's own architecture
    assert pools(estimate(BASE))["teacher_weights"].bytes == count_parameters(architecture("llama-3.2-1b")).total * 2


def test_a_teacher_with_another_vocabulary_is_refused():
    # DistillationTrainer.__init__ L694-702: "requires a shared vocabulary" (Qwen2.5-7B 152,064 vs 0.5B 151,936)
    with pytest.raises(FieldError) as error:
        resolve(parse({**BASE, "model": "qwen2.5-0.5b", "teacher": "qwen2.5-7b"}))
    assert error.value.key == "teacher" and "151,936" in error.value.message
    with pytest.raises(FieldError) as error:
        resolve(parse({**BASE, "teacher": "no-such-model"}))
    assert error.value.key == "teacher"


def test_divergence_tiles_are_two_fp32_buffers_of_4096_by_32768():
    # ChunkedDivergenceFunction.forward L417-419: s_buf and t_buf, fp32 [min(N, 4096), 32768], allocated whole
    big = pools(estimate({**BASE, "batch": "16"}))                  # N = 16 × 512 tokens, over one tile
    small = pools(estimate({**BASE, "batch": "1", "max_completion_length": "64"}))    # N = 64
    assert big["divergence_forward"].bytes >= 2 * 4096 * 32768 * 4
    assert small["divergence_forward"].bytes - 64 * 11 * 4 == 2 * 64 * 32768 * 4


def test_a_lora_student_has_no_head_gradient_in_the_divergence_backward():
    full = pools(estimate({**BASE, "precision": "bf16"}))
    lora = pools(estimate({**BASE, "precision": "bf16", "method": "distill-lora"}))
    vocab_hidden = architecture("llama-3.2-1b").vocab * architecture("llama-3.2-1b").hidden
    # fp32 accumulation then the bf16 cast (backward L539, L586)
    assert full["divergence_backward"].bytes - lora["divergence_backward"].bytes == vocab_hidden * (4 + 2)


def test_checkpointing_holds_a_layers_forward_working_tensors():
    assert "checkpointed_forward" in pools(estimate({**BASE, "recompute": "full"}))
    assert "checkpointed_forward" not in pools(estimate({**BASE, "recompute": "none"}))


def test_rollout_batch_is_every_micro_batchs_prompts():
    # _prepare_inputs L1773-1783: one generation every gradient_accumulation_steps micro-batches, for all their rows
    one = pools(estimate({**BASE, "precision": "bf16"}))["rollout_kv_cache"].bytes
    four = pools(estimate({**BASE, "precision": "bf16", "microbatches": "4"}))["rollout_kv_cache"].bytes
    assert four == 4 * one


def test_the_teacher_and_rollout_inputs_apply_to_distillation():
    for key in ("teacher", "teacher_dtype", "max_completion_length", "rollout"):
        assert applies.applies(key, {"method": "distill", "mode": "train"})
        assert applies.applies(key, {"method": "distill-lora", "mode": "train"})
    assert not applies.applies("teacher", {"method": "grpo", "mode": "train"})
    assert not applies.applies("teacher", {"method": "full", "mode": "train"})
    assert applies.applies("lora_rank", {"method": "distill-lora", "mode": "train"})


def test_notes_say_what_the_estimate_assumes():
    notes = estimate({**BASE, "precision": "amp-bf16"}).warnings
    assert any("batch counts prompts" in n for n in notes)
    assert any("_forward_redirection" in n for n in notes)


def test_a_vllm_rollout_adds_no_old_policy_pass():
    # use_vllm (distillation_config.py L301-308): the same VLLMGeneration as GRPO's, max_num_seqs = batch × micro-batches
    # (distillation_trainer.py L789-822); distillation scores nothing with the student before its update
    result = estimate({**BASE, "rollout": "vllm-colocate"})
    assert "rollout (vLLM)" in result.moments and "old-policy log-probs" not in result.moments
    assert any(p.group == "rollout_engine" for p in result.pools)
    assert not any(p.group == "rollout_engine" for p in estimate({**BASE, "rollout": "vllm-server"}).pools)


def test_sequence_and_pipeline_parallelism_are_refused():
    # DistillationConfig.__post_init__ L411-420 refuses cp_size > 1; the Trainer has no pipeline stages
    for key in ("cp", "pp"):
        with pytest.raises(FieldError) as error:
            resolve(parse({**BASE, key: "2", "dp": "1"}))
        assert error.value.key == key


def test_the_longest_prompt_leaves_room_for_the_completion():
    # the update runs over seq (the prompt) + max_completion_length (_compute_loss L1822: torch.cat([prompt_ids,
    # completion_ids])): the longest seq answered is the model's positions less the completion (131,072 for Llama 3.2)
    from pycore.answers.answer import answer
    from pycore.memory.estimate import estimate_values
    tiny = {"model": "llama-3.2-1b", "layers": "1", "hidden": "64", "heads": "1", "kv_heads": "1", "ffn": "128",
            "method": "distill", "max_completion_length": "512", "batch": "1"}
    values = frameworks.apply(parse(tiny))
    answers = answer(values, estimate_values(values))
    assert answers["max_seq"] == 131_072 - 512 and answers["batch_unit"] == "prompt"
    assert any("less max_completion_length 512" in note for note in answers["notes"])


def test_a_pools_acronym_keeps_its_case_under_the_models_name():
    # "DDP gradient buckets" under a model's name stays DDP (it read "Student dDP gradient buckets")
    for method, name in (("distill", "Student DDP gradient buckets"), ("grpo", "Policy DDP gradient buckets")):
        labels = [p.label for p in estimate({**BASE, "method": method, "dp": "2"}).pools]
        assert any(label.startswith(name) for label in labels), labels
