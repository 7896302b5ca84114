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


def _steps(*claims_gib):
    return [{"label": f"c{i}", "runs": True, "estimated_reserved_bytes": int(g * 2**30)} for i, g in enumerate(claims_gib)]


def test_schedule_keeps_running_cases_within_the_memory_budget_largest_first():
    steps = _steps(10, 50, 30, 1)
    running, most, started = set(), [0], []

    def launch(step):
        started.append(step["label"])
        running.add(step["label"])
        most[0] = max(most[0], sum(s["estimated_reserved_bytes"] + measure_cuda.CONTEXT_BYTES
                                   for s in steps if s["label"] in running))
        return step["label"]

    def poll(handle):
        running.discard(handle)
        return {"label": handle}, ""

    done = list(measure_cuda.schedule(steps, 64 * 2**30, 4, launch, poll))
    assert started[0] == "c1"                       # the 50 GiB case first
    assert most[0] <= 64 * 2**30
    assert sorted(s["label"] for s, record, _ in done if record) == ["c0", "c1", "c2", "c3"]


def test_schedule_reruns_a_case_alone_when_it_ran_out_of_memory_beside_others():
    steps = _steps(10, 10)
    tries = {"c0": 0, "c1": 0}
    alive = {}

    def launch(step):
        tries[step["label"]] += 1
        alive[step["label"]] = 2            # polls until it ends
        return step["label"]

    def poll(handle):
        alive[handle] -= 1
        if alive[handle]:
            return None
        if handle == "c0" and tries["c0"] == 1:
            return None, "failed: torch.OutOfMemoryError: CUDA out of memory"
        return {"label": handle}, ""

    done = list(measure_cuda.schedule(steps, 100 * 2**30, 2, launch, poll))
    assert tries == {"c0": 2, "c1": 1}
    assert all(record for _, record, _ in done) and len(done) == 2


def test_schedule_lists_what_the_deadline_left_as_not_run():
    clock = iter([0, 10, 10, 10, 10, 10])
    done = list(measure_cuda.schedule(_steps(1, 1, 1), 100 * 2**30, 1, lambda s: s["label"],
                                      lambda h: ({"label": h}, ""), deadline=5, clock=lambda: next(clock)))
    assert [bool(record) for _, record, _ in done] == [True, False, False]
    assert done[1][2].startswith("not run")
