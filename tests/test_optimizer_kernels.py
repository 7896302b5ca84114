"""The optimizer step's temporaries per kernel, against validation/measured_optimizer.json (torch 2.13,
validation/measure_optimizer.py: MemTracker's peak during step() above parameters, gradients and state)."""

import json
from pathlib import Path

import pytest

from pycore import estimate

RECORD = json.loads((Path(__file__).resolve().parent.parent / "validation" / "measured_optimizer.json").read_text())


@pytest.mark.parametrize("kernel,params_coefficient,largest_coefficient", [
    ("foreach", 1.0, 0.0), ("fused", 0.0, 0.0), ("for-loop", 0.0, 2.0)])
def test_adamw_temporaries_follow_the_measured_kernel(kernel, params_coefficient, largest_coefficient):
    case = next(c for c in RECORD["cases"] if c["optimizer"] == "adamw" and c["kernel"] == kernel
                and c["dtype"] == "fp32")
    assert case["params_coefficient"] == pytest.approx(params_coefficient, abs=1e-3)
    assert case["largest_tensor_coefficient"] == pytest.approx(largest_coefficient, abs=1e-3)
    # The same rule in the estimate: fp32 states (4 B), the model's own counts.
    result = estimate({"model": "gpt2", "precision": "fp32", "optimizer_impl": kernel})
    from pycore import catalog
    from pycore.architecture import count_parameters
    counts = count_parameters(catalog.architecture("gpt2"))
    expected = round((params_coefficient * counts.total + largest_coefficient * counts.largest_tensor) * 4)
    assert result["components"].get("optimizer_step_temporaries", 0) == expected
