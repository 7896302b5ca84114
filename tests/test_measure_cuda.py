"""validation/measure_cuda.py's CPU-side logic: the plan and the nvidia-smi parsing (no GPU here)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import measure_cuda  # noqa: E402


def test_compute_apps_parsing_picks_this_process_in_mib():
    text = "1234, 512\n4321, 80000\n"
    assert measure_cuda.parse_compute_apps(text, 4321) == 80000 * 2**20
    assert measure_cuda.parse_compute_apps(text, 99) is None
    assert measure_cuda.parse_compute_apps("[N/A]\n", 99) is None


def test_plan_skips_cases_that_do_not_fit():
    cases = [("gpt2 fp32", dict(model="gpt2", precision="fp32", batch="1", seq="128")),
             ("llama-3.1-8b fp32", dict(model="llama-3.1-8b", precision="fp32", batch="1", seq="1024"))]
    steps = measure_cuda.plan(cases, 80 * 2**30)
    assert [s["runs"] for s in steps] == [True, False]       # 8B in fp32 with AdamW: 16 bytes x 8e9 > 80 GiB
    assert "does not fit" in steps[1]["why"]
    assert steps[0]["estimated_peak_bytes"] < steps[0]["estimated_reserved_bytes"]
