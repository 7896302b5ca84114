"""KTO as TRL 1.16's KTOTrainer runs it (pycore/memory/posttraining.py kto_step): unpaired rows, the policy's no_grad
forward on the KL rows before its forward with grad, the reference's forwards while the policy's activations are held,
the fused head. The measured cases are held in tests/test_validation.py (validation/measured_kto.json, written by
validation/measure_kto.py).

The hand-worked numbers use measure_kto.py's "llama small" config: 2 layers, hidden h = 512, 8 heads, 2 KV heads, ffn
1,408, vocabulary V = 32,000, untied; P = 38,406,656 parameters (the count measure_kto.py recorded as "params").
"""

import pytest

from pycore.base.errors import FieldError
from pycore.inputs.schema import parse
from pycore.memory.estimate import estimate
from pycore.memory.posttraining import KL_FORWARD, REFERENCE
from pycore.memory.setup import resolve

SMALL = {"model": "llama-3.1-8b", "layers": "2", "hidden": "512", "heads": "8", "kv_heads": "2", "ffn": "1408",
         "vocab": "32000", "optimizer_impl": "foreach", "precision": "bf16", "recompute": "none", "batch": "2",
         "seq": "512", "cublas_workspace": ":0:0"}       # measured on the CPU: no cuBLAS workspace
P = 38_406_656
WEIGHTS = 2 * P                     # bf16: 76,813,312
ADAM = 2 * 2 * P                    # AdamW's two states in bf16: 153,626,624
# A no_grad forward's widest moment (posttraining.no_grad_working) at T = 2 × 512 = 1,024 tokens, N = T - 2 = 1,022
# scored (every token but each row's last):
#   one layer: w = 3 e max(ffn, q_dim) + (2e + 4) h = 3·2·1,408 + 8·512 = 12,544 B/token; × 1,024 = 12,845,056
#   the fused head: mm_buf n × c × e = 1,022 × 32,768 × 2 = 66,977,792, plus the last hidden states and their
#   gathered copy (T + N) × h × e = 2,046 × 512 × 2 = 2,095,104: 69,072,896, the larger
NO_GRAD = 1_022 * 32_768 * 2 + (1_024 + 1_022) * 512 * 2


def pools(result):
    return {p.key: p for p in result.pools}


def test_the_batch_counts_unpaired_rows_not_pairs():
    # DataCollatorForUnpairedPreference (kto_trainer.py L161-203): batch rows; DPO's collator stacks 2 × batch
    kto = resolve(parse({**SMALL, "method": "kto"}))
    dpo = resolve(parse({**SMALL, "method": "dpo"}))
    assert kto.workload.batch == 2 and dpo.workload.batch == 4
    assert estimate({**SMALL, "method": "kto"}).tokens == 2 * 512


def test_kto_of_two_rows_holds_what_dpo_of_one_pair_holds_and_a_kl_forward_before():
    kto = estimate({**SMALL, "method": "kto"})
    dpo = estimate({**SMALL, "method": "dpo", "batch": "1"})
    assert list(kto.moments) == [KL_FORWARD] + list(dpo.moments)
    assert {m: v for m, v in kto.moments.items() if m != KL_FORWARD} == dict(dpo.moments)


def test_the_kl_forward_holds_the_step_s_states_and_one_no_grad_pass():
    result = estimate({**SMALL, "method": "kto"})
    live = {p.key: p.bytes for p in result.pools if KL_FORWARD in p.moments}
    assert NO_GRAD == 69_072_896
    assert live == {"weights": WEIGHTS, "optimizer": ADAM, "reference_weights": WEIGHTS, "kl_forward": NO_GRAD}
    # 76,813,312 + 153,626,624 + 76,813,312 + 69,072,896; measured 372,308,324 (validation/measured_kto.json,
    # "llama small kto full bf16 b2s512", phase "KL forward"): +1.1%
    assert result.moments[KL_FORWARD] == 376_326_144
    assert pools(result)["kl_forward"].source.startswith("huggingface/trl 1.16.0 ")
    assert "kto_trainer.py L1337-1368" in pools(result)["kl_forward"].source


def test_the_reference_forward_runs_while_the_policy_s_activations_are_held():
    result = estimate({**SMALL, "method": "kto"})
    by_key = pools(result)
    assert REFERENCE in by_key["activations"].moments and KL_FORWARD not in by_key["activations"].moments
    assert by_key["reference_forward"].bytes == NO_GRAD        # the KL rows and the batch: as many tokens each
    assert by_key["reference_forward"].moments == (REFERENCE,)
    # the policy's head asks for log_probs, entropy and mean_logits (kto_trainer.py L967-970): 11 fp32 values a
    # scored token, 1,022 × 44 = 44,968, beside mm_buf 66,977,792 and the last hidden states 1,024 × 512 × 2 = 1,048,576
    assert by_key["fused_head_forward"].bytes == 66_977_792 + 1_048_576 + 44_968


def test_a_lora_policy_has_no_reference_copy_its_adapters_are_disabled():
    # KTOTrainer.__init__ L919-925: no ref_model for a PEFT policy; _compute_loss L1430-1435 use_adapter(model, None)
    result = estimate({**SMALL, "method": "kto-lora", "lora_targets": "qv"})
    by_key = pools(result)
    assert "reference_weights" not in by_key
    assert by_key["reference_forward"].bytes == NO_GRAD and REFERENCE in result.moments
    assert KL_FORWARD in result.moments and by_key["kl_forward"].bytes == NO_GRAD


def test_precomputed_reference_log_probs_hold_no_reference_but_the_kl_forward_still_runs():
    # ref_logps and ref_KL_logps come with the batch (L1418-1424); _compute_kl_logps runs all the same (L1379)
    result = estimate({**SMALL, "method": "kto", "ref_model": "precomputed"})
    assert REFERENCE not in result.moments
    assert not any(p.group == "reference_model" for p in result.pools)
    # 76,813,312 + 153,626,624 + 69,072,896; measured 295,494,772 bytes in the KL forward (validation/measured_kto.json
    # phase_peaks, the precomputed case; +1.4%)
    assert result.moments[KL_FORWARD] == WEIGHTS + ADAM + NO_GRAD == 299_512_832


@pytest.mark.parametrize("precision,phase", [
    ("bf16", "backward start"),         # measured peak: backward (validation/measured_kto.json)
    ("amp-bf16", "optimizer step"),     # fp32 weights and states: the foreach AdamW step, as measured
])
def test_the_peak_phase(precision, phase):
    assert estimate({**SMALL, "method": "kto", "precision": precision}).peak_moment == phase


def test_kto_needs_a_reference_and_two_rows():
    with pytest.raises(FieldError) as error:
        resolve(parse({**SMALL, "method": "kto", "ref_model": "none"}))
    assert error.value.key == "ref_model"
    notes = estimate({**SMALL, "method": "kto", "batch": "1"}).warnings
    assert notes[0].startswith("KTO: batch counts unpaired examples")
    assert any("must be > 1" in note for note in notes)


def test_kto_qlora_stores_the_base_in_nf4_as_dpo_qlora_does():
    kto = resolve(parse({**SMALL, "method": "kto-qlora", "lora_targets": "qv"}))
    assert kto.quant == "nf4-dq" and kto.finetune.recipe == "kto" and kto.finetune.reference == "adapters-off"


def test_the_precision_trl_defaults_to_is_explained_with_what_bf16_would_save():
    # pycore.inputs.frameworks.RECIPES: TRL loads in float32 unless model_init_kwargs names a dtype, bf16=True
    # autocasts (amp-bf16); the answer re-estimates at precision=bf16 (the newcomer's run-through: never explained)
    from pycore.answers.compare import precision_default
    from pycore.base.steps import finish
    from pycore.inputs import frameworks
    from pycore.inputs.schema import parse
    from pycore.memory.estimate import estimate_values
    values = parse({"model": "llama-3.1-8b", "method": "kto"})         # precision=auto, as the page and CLI pass it
    result = estimate_values(values)
    said = finish(precision_default(values, result))
    bf16 = estimate_values(parse({"model": "llama-3.1-8b", "method": "kto", "precision": "bf16"}))
    assert result.setup.precision == frameworks.RECIPES["kto"].defaults["precision"] == "amp-bf16"
    assert said["text"].startswith("Precision: TRL KTOTrainer loads a model given by name in float32")
    assert said["total_bytes"] == bf16.total_bytes < result.total_bytes and said["query"] == {"precision": "bf16"}


@pytest.mark.parametrize("inputs", [{"method": "dpo-qlora"}, {"method": "distill"}, {"method": "ppo"},
                                    {"method": "dpo", "weight_dtype": "bf16"}, {"method": "dpo", "precision": "bf16"}])
def test_the_trl_precision_answer_is_not_given_where_its_words_would_be_wrong(inputs):
    # an NF4 base (QLoRA), distillation's fp32 update, PPO's script-loaded models, a dtype given per pool, a precision
    # given: the review of the answer's wording
    from pycore.answers.compare import precision_default
    from pycore.base.steps import finish
    from pycore.inputs.schema import parse
    from pycore.memory.estimate import estimate_values
    values = parse({"model": "llama-3.2-1b", **inputs})
    said = finish(precision_default(values, estimate_values(values)))
    assert said is None or not said["text"].startswith("Precision: TRL")


@pytest.mark.parametrize("method", ["lora", "qlora"])
def test_no_master_weights_answer_with_adapters(method):
    # PEFT keeps a LoRA's trained weights, gradients and AdamW states in the adapters' fp32 and freezes the base: the
    # "pure bf16, 8 bytes of model states per parameter" sentence and its bf16-master change were wrong for them
    # (a newcomer's run-through of Apertus with LoRA)
    from pycore.answers.compare import precision_default
    from pycore.base.steps import finish
    from pycore.inputs.schema import parse
    from pycore.memory.estimate import estimate_values
    values = parse({"model": "apertus-8b-instruct-2509", "method": method})
    assert finish(precision_default(values, estimate_values(values))) is None
    plain = parse({"model": "apertus-8b-instruct-2509"})
    assert finish(precision_default(plain, estimate_values(plain)))["change"] == "precision=bf16-master"
