"""Step temporaries per optimizer kernel against validation/measured_optimizer.json.

The record is written by validation/measure_optimizer.py (torch 2.13.0 on CPU, lion-pytorch 0.2.5): the
bytes ``optimizer.step()`` allocates above parameters, gradients and state, counted exactly by a
TorchDispatchMode and cross-checked with MemTracker. Each case is three parameter sets; the formula must
give every measured value within 0.2% (the small per-tensor statistics Adafactor keeps beside its
full-size estimate, 0.17% of the largest tensor, are not modelled).
"""

import json
from pathlib import Path

import pytest

from pycore.memory import optimizer

ROOT = Path(__file__).resolve().parent.parent
RECORD = json.loads((ROOT / "validation" / "measured_optimizer.json").read_text())
ELEMENT_BYTES = {"fp32": 4, "bf16": 2}
TOLERANCE = 0.002
MEASURED = [case for case in RECORD["cases"] if "runs" in case and case["optimizer"] in optimizer.STATES]


def test_record_covers_every_kernel_of_the_optimizers_torch_ships():
    assert RECORD["torch"].startswith("2.13")
    measured = {(case["optimizer"], case["kernel"], case["dtype"]) for case in MEASURED}
    for name in ("adamw", "adam", "sgd", "sgd-momentum"):
        for kernel in optimizer.KERNELS:
            assert {(name, kernel, "fp32"), (name, kernel, "bf16")} <= measured
    assert ("adafactor", "foreach", "fp32") in measured and ("adafactor", "for-loop", "fp32") in measured
    assert ("lion", "foreach", "fp32") in measured and ("lion", "for-loop", "fp32") in measured


def test_record_agrees_with_memtracker():
    for case in MEASURED:
        for run in case["runs"].values():
            assert run["temporary_bytes"] == run["temporary_bytes_exact"]


@pytest.mark.parametrize("case", MEASURED, ids=lambda c: f"{c['optimizer']} {c['kernel']} {c['dtype']}")
def test_step_temporary_bytes_match_the_measurement(case):
    for label, run in case["runs"].items():
        estimated = optimizer.step_temporary_bytes(
            case["optimizer"], run["params"], ELEMENT_BYTES[case["dtype"]], kernel=case["kernel"],
            largest_tensor=run["largest_tensor"], preceding_tensor=run["preceding_tensor"])
        measured = run["temporary_bytes_exact"]
        assert estimated == pytest.approx(measured, rel=TOLERANCE, abs=4096), label


def _coefficients(name, kernel, dtype="fp32"):
    (case,) = [c for c in RECORD["cases"] if (c["optimizer"], c["kernel"], c["dtype"]) == (name, kernel, dtype)]
    return case["params_coefficient"], case["largest_tensor_coefficient"]


def test_foreach_is_unchanged_from_the_validated_estimate():
    # validation/measured.json's cases run foreach=True; validation/measured_optimizer.json measures that
    # kernel at 1.0 × params for AdamW and 0 for SGD with momentum (params_coefficient).
    assert _coefficients("adamw", "foreach") == (1.0, 0.0)
    assert _coefficients("sgd-momentum", "foreach") == (0.0, 0.0)
    assert optimizer.step_temporary_bytes("adamw", 10**9, 4) == 1.0 * 10**9 * 4
    assert optimizer.step_temporary_bytes("sgd-momentum", 10**9, 4) == 0


def test_for_loop_without_a_largest_tensor_is_an_upper_bound():
    # Measured (validation/measured_optimizer.json, adamw for-loop): 2.0 × the largest tensor. Not knowing
    # the largest tensor, all parameters count as one, which bounds every measured run from above.
    assert _coefficients("adamw", "for-loop") == (0.0, 2.0)
    assert optimizer.step_temporary_bytes("adamw", 1000, 4, kernel="for-loop", largest_tensor=100) == 2 * 100 * 4
    for case in MEASURED:
        if case["kernel"] != "for-loop":
            continue
        for label, run in case["runs"].items():
            bound = optimizer.step_temporary_bytes(case["optimizer"], run["params"], ELEMENT_BYTES[case["dtype"]],
                                                   kernel="for-loop")
            assert bound >= run["temporary_bytes_exact"], (case["optimizer"], case["dtype"], label)


def test_fused_allocates_nothing_and_adafactor_falls_back_to_its_loop():
    # validation/measured_optimizer.json: torch's fused AdamW allocates nothing (params_coefficient 0).
    assert _coefficients("adamw", "fused") == (0.0, 0.0)
    assert optimizer.step_temporary_bytes("adamw", 10**9, 4, kernel="fused") == 0
    assert optimizer.step_temporary_bytes("adafactor", 1000, 4, kernel="fused", largest_tensor=100) == \
        optimizer.step_temporary_bytes("adafactor", 1000, 4, kernel="for-loop", largest_tensor=100)


def test_unknown_kernel_is_refused():
    with pytest.raises(ValueError, match="kernel"):
        optimizer.step_temporary_bytes("adamw", 1000, 4, kernel="apex")


@pytest.mark.parametrize("kernel,expected", [
    # GPT-2 in fp32 with AdamW, 124,439,808 parameters (validation/param_counts.json). The coefficients are
    # the record's (validation/measured_optimizer.json, adamw fp32): foreach 1.0 × params × 4 B;
    # fused 0; for-loop 2.0 × the largest tensor, here the embedding 50257 × 768 = 38,597,376 elements,
    # updated first (nothing before it): 2 · 38,597,376 · 4 B.
    ("foreach", 124_439_808 * 4),           # 497,759,232
    ("fused", 0),
    ("for-loop", 2 * 50257 * 768 * 4),      # 308,779,008
])
def test_the_estimate_uses_the_measured_kernel_rule(kernel, expected):
    from pycore import estimate
    result = estimate({"model": "gpt2", "seq": "1024", "precision": "fp32", "optimizer_impl": kernel}).as_dict()
    assert result["params"]["total"] == 124_439_808
    assert result["components"].get("optimizer_step_temporaries", 0) == expected
