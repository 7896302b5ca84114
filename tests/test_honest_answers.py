"""Answers that are answers (issue 27): a bound the counted memory does not give is said in words, every fix
fits or says how far it still is, a change that changes nothing is not offered, and the first thing people
try when a run does not fit - a smaller micro-batch with more accumulation - is offered at its true peak."""

from pycore import estimate, parse
from pycore.answers.answer import answer
from pycore.memory.estimate import estimate_values
from pycore.output import report


def _answers(query):
    values = parse(query)
    result = estimate_values(values)
    return result, answer(values, result)


def test_a_batch_the_memory_counted_does_not_bound_is_said_in_words():
    # Issue 27: params=100M batch=32 (activations not counted) answered "Largest micro-batch 1,048,576".
    result, found = _answers({"params": "100M", "batch": "32"})
    assert found["max_batch"] is None and "not bounded" in found["max_batch_unbounded"]
    row = next(r for r in report.display_answers(result, found) if r["key"] == "max_batch")
    assert row["text"].startswith("not bounded") and not any(ch.isdigit() for ch in row["text"])


def test_every_fix_fits_or_says_how_far_it_still_is():
    result, found = _answers({"model": "llama-3.1-8b", "batch": "4"})
    assert found["how_to_fit"]
    usable = 85_520_809_984           # presets/gpus.json: the H100 SXM's usable bytes
    for fix in found["how_to_fit"]:
        assert fix["fits"] == (fix["total_bytes"] <= usable)
        assert fix["text"].endswith("(fits)") if fix["fits"] else " over" in fix["text"]
        assert fix["total_bytes"] < result.total_bytes                  # every fix changes something


def test_a_smaller_micro_batch_with_more_accumulation_keeps_the_global_batch_at_its_true_peak():
    _, found = _answers({"model": "llama-3.1-8b", "batch": "4"})
    fixes = {f["change"]: f for f in found["how_to_fit"]}
    one = fixes["batch=1 microbatches=4 (same global batch)"]
    assert one["total_bytes"] == estimate({"model": "llama-3.1-8b", "batch": "1", "microbatches": "4"}).total_bytes
    # at its true peak: more than the same micro-batch without accumulation, by the accumulated gradients
    assert one["total_bytes"] > estimate({"model": "llama-3.1-8b", "batch": "1"}).total_bytes


def test_a_layout_that_changes_nothing_is_not_offered():
    # Issue 27: recompute=full offered where it changes nothing (activations not counted).
    _, found = _answers({"params": "100M", "batch": "32"})
    assert [o["label"] for o in found["plan"]] == ["as given"]


def test_training_time_runs_at_the_precisions_matmul_rate():
    # presets/gpus.json, the H100 SXM datasheet: 989 dense bf16 TFLOPS, 67 fp32 (allow_tf32 is off by default)
    _, fp32 = _answers({"model": "gpt2", "seq": "1024", "precision": "fp32", "train_tokens": "10B"})
    _, bf16 = _answers({"model": "gpt2", "seq": "1024", "precision": "bf16", "train_tokens": "10B"})
    assert abs(fp32["cost"]["hours"] / bf16["cost"]["hours"] - 989 / 67) < 1e-9
    assert "fp32" in fp32["cost"]["formula"]
