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
