"""Calibration from a real run (issue 30): published vLLM start-up logs, PyTorch memory figures and nvidia-smi
readings read back (pycore.answers.calibrate), measured against the estimate of the same setup, and the overrides
that re-estimate to the measured figure. Each pasted example keeps its source; a line made up for the arithmetic
says so."""

import json
import sys
import time
from pathlib import Path

import pytest
from fuzz_counts import count_fuzz
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pycore.answers.calibrate import EXPECTED, MAX_CHARS, SOURCES, apply, calibrate, figures, read, solve_activations
from pycore.base.errors import FieldError
from pycore.base.units import GIB
from pycore.inputs.schema import parse
from pycore.memory.estimate import estimate_values
from pycore.output import cli
from pycore.output.calibration import display, text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import compare  # noqa: E402

# ---- published examples, each with its source ----------------------------------------------------------------------

# vLLM 0.15.1, Llama-3.1-8B-Instruct on one A100-40GB, gpu_memory_utilization 0.9, max_model_len 131072, enforce
# eager: github.com/ilseokoh/vllm-gce (the run tests/test_serving.py and validation/compare.py already cite).
VLLM_V1_A100 = """\
(EngineCore_DP0 pid=10479) INFO 02-06 03:33:31 [default_loader.py:291] Loading weights took 4.75 seconds
(EngineCore_DP0 pid=10479) INFO 02-06 03:33:32 [gpu_model_runner.py:4130] Model loading took 14.99 GiB memory and 6.720924 seconds
(EngineCore_DP0 pid=10479) INFO 02-06 03:33:33 [gpu_worker.py:356] Available KV cache memory: 19.28 GiB
(EngineCore_DP0 pid=10479) INFO 02-06 03:33:33 [kv_cache_utils.py:1307] GPU KV cache size: 157,936 tokens
(EngineCore_DP0 pid=10479) INFO 02-06 03:33:33 [kv_cache_utils.py:1312] Maximum concurrency for 131,072 tokens per request: 1.20x
(EngineCore_DP0 pid=10479) INFO 02-06 03:33:33 [core.py:272] init engine (profile, create kv cache, warmup model) took 1.71 seconds
"""
GCE_SETUP = {"model": "llama-3.1-8b", "mode": "infer", "engine": "vllm", "gpu": "a100-40gb", "seq": "131071",
             "new_tokens": "1", "max_batched_tokens": "8192"}

# vLLM V1 (v0.8), meta-llama/Llama-3.1-8B-Instruct on one L40S: vllm-project/vllm pull request 17122's description.
VLLM_V1_L40S = """\
INFO 04-24 16:32:59 [loader.py:458] Loading weights took 2.95 seconds
INFO 04-24 16:33:00 [gpu_model_runner.py:1316] Model loading took 14.9889 GiB and 3.652170 seconds
INFO 04-24 16:33:13 [kv_cache_utils.py:634] GPU KV cache size: 158,656 tokens
INFO 04-24 16:33:13 [kv_cache_utils.py:637] Maximum concurrency for 32,768 tokens per request: 4.84x
"""

# vLLM V0 (v0.6.6-v0.7), meta-llama/Llama-3.2-11B-Vision on an H100-80G: vllm-project/vllm pull request 12126's
# description.
VLLM_V0_H100 = """\
INFO 01-16 09:40:00 worker.py:238] the current vLLM instance can use total_gpu_memory (79.22GiB) x gpu_memory_utilization (0.90) = 71.29GiB
INFO 01-16 09:40:00 worker.py:238] model weights take 19.86GiB; non_torch_memory takes 0.16GiB; PyTorch activation peak memory takes 36.63GiB; the rest of the memory reserved for KV Cache is 14.65GiB.
INFO 01-16 09:40:00 executor_base.py:95] # CUDA blocks: 6001, # CPU blocks: 1638
"""  # noqa: E501

# vLLM's table form, `vllm serve meta-llama/Meta-Llama-3-8B` on an H100: vllm-project/vllm pull request 10511,
# youkaichao's sanity checks (2024-12-14).
VLLM_TABLE_H100 = """\
INFO 12-13 19:54:18 worker.py:243] Memory profiling results:
INFO 12-13 19:54:18 worker.py:243] duration     0.75 seconds
INFO 12-13 19:54:18 worker.py:243] total_gpu_memory     79.22GiB
INFO 12-13 19:54:18 worker.py:243] gpu_memory_utilization       0.90
INFO 12-13 19:54:18 worker.py:243] the current vLLM instance can use    71.29GiB
INFO 12-13 19:54:18 worker.py:243] model weights take   14.96GiB
INFO 12-13 19:54:18 worker.py:243] non_torch_memory     1.79GiB
INFO 12-13 19:54:18 worker.py:243] PyTorch activation peak memory       1.26GiB
INFO 12-13 19:54:18 worker.py:243] available_kv_cache_memory    53.29GiB
"""

# vLLM 0.6.4, meta-llama/Llama-3.1-8B-Instruct on an RTX 3090, max_model_len 20000: vllm-project/vllm issue 10517
# (kaspersiminski, 2024-12-02; the "#" before "GPU blocks" lost to the markdown).
VLLM_064_3090 = """\
Loading model weights took 14.9888 GB
Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB peak_torch_memory=17.06GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB kv_cache_size=3.81GiB gpu_memory_utilization=0.90
GPU blocks: 1952, # CPU blocks: 2048
Maximum concurrency for 20000 tokens per request: 1.56x
"""  # noqa: E501

# Qwen3-235B-A22B-FP8 on 4x H100, tp 4: vllm-project/vllm issue 21348.
VLLM_QWEN3 = "Available KV cache memory: 8.11 GiB\nGPU KV cache size: 178,880 tokens\n"

# torch.cuda.memory_summary() after an OOM (PyTorch 1.4, "MB" units): pytorch/pytorch issue 35901 (david-macleod).
SUMMARY_MB = """\
|===========================================================================|
|                  PyTorch CUDA memory summary, device ID 0                 |
|---------------------------------------------------------------------------|
|            CUDA OOMs: 1            |        cudaMalloc retries: 1         |
|===========================================================================|
|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |
|---------------------------------------------------------------------------|
| Allocated memory      |    1062 MB |    4877 MB |   89299 MB |   88237 MB |
|       from large pool |    1048 MB |    4865 MB |   89263 MB |   88215 MB |
|       from small pool |      14 MB |      14 MB |      35 MB |      21 MB |
|---------------------------------------------------------------------------|
| Active memory         |    1062 MB |    4877 MB |   89299 MB |   88237 MB |
|       from large pool |    1048 MB |    4865 MB |   89263 MB |   88215 MB |
|       from small pool |      14 MB |      14 MB |      35 MB |      21 MB |
|---------------------------------------------------------------------------|
| GPU reserved memory   |   12420 MB |   12420 MB |   16924 MB |    4504 MB |
"""

# torch.cuda.memory_summary()'s bytes and KB rows: pytorch/pytorch pull request 38884's example output.
SUMMARY_BYTES = """\
|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |
|---------------------------------------------------------------------------|
| Allocated memory      |    1024 B  |  133632 B  |  273920 B  |  272896 B  |
|       from large pool |       0 B  |       0 B  |       0 B  |       0 B  |
|---------------------------------------------------------------------------|
| GPU reserved memory   |    2048 KB |    2048 KB |    2048 KB |       0 B  |
"""

# nvidia-smi 450.191.01 on 8x A100-SXM-80GB, training: keyu-tian/SparK issue 8 (the first three GPUs).
SMI_A100 = """\
|===============================+======================+======================|
|   0  A100-SXM-80GB       On   | 00000000:10:00.0 Off |                    0 |
| N/A   61C    P0   175W / 400W |  33717MiB / 81252MiB |     84%      Default |
|                               |                      |             Disabled |
+-------------------------------+----------------------+----------------------+
|   1  A100-SXM-80GB       On   | 00000000:16:00.0 Off |                    0 |
| N/A   52C    P0   174W / 400W |  33695MiB / 81252MiB |     89%      Default |
|                               |                      |             Disabled |
+-------------------------------+----------------------+----------------------+
"""

# nvidia-smi's MIG table, whose second row per device is BAR1 (not memory in use): XuehaiPan/nvitop pull request 8.
SMI_MIG = """\
|  1    3   0   0  |  14366MiB / 19968MiB | 28      0 |  2   0    1    0    0 |
|                  |      4MiB / 32767MiB |           |                       |
"""

# transformers docs, model_memory_anatomy.md: bert-large-uncased classifier on a V100, batch 4, seq 512, fp32 (the
# reading validation/compare.py's READINGS holds, with its setup).
PYNVML_BERT = "GPU memory occupied: 14949 MB.\n"


def _values(inputs):
    return parse(dict(inputs))


# ---- reading --------------------------------------------------------------------------------------------------------

def _read(text):
    return {figure: reading.value for figure, reading in figures(read(text)).items()}


def test_vllm_v1_lines():
    got = _read(VLLM_V1_A100)
    assert got == {"weights": round(14.99 * GIB), "kv_cache": round(19.28 * GIB), "kv_tokens": 157_936,
                   "max_model_len": 131_072, "concurrency": 1.20}
    got = _read(VLLM_V1_L40S)
    assert got["weights"] == round(14.9889 * GIB) and got["kv_tokens"] == 158_656 and got["concurrency"] == 4.84
    assert _read(VLLM_QWEN3) == {"kv_cache": round(8.11 * GIB), "kv_tokens": 178_880}


def test_vllm_v0_profile_lines_in_their_three_forms():
    v0 = _read(VLLM_V0_H100)
    assert v0 == {"total_gpu_memory": round(79.22 * GIB), "gpu_util": 0.90, "requested": round(71.29 * GIB),
                  "weights": round(19.86 * GIB), "non_torch": round(0.16 * GIB),
                  "activation_peak": round(36.63 * GIB), "kv_cache": round(14.65 * GIB), "kv_blocks": 6001}
    table = _read(VLLM_TABLE_H100)
    assert table == {"total_gpu_memory": round(79.22 * GIB), "gpu_util": 0.90, "requested": round(71.29 * GIB),
                     "weights": round(14.96 * GIB), "non_torch": round(1.79 * GIB),
                     "activation_peak": round(1.26 * GIB), "kv_cache": round(53.29 * GIB)}
    old = _read(VLLM_064_3090)
    assert old == {"weights": round(14.9888 * GIB), "total_gpu_memory": round(23.58 * GIB),
                   "non_torch": round(0.35 * GIB), "kv_cache": round(3.81 * GIB), "gpu_util": 0.90,
                   "kv_blocks": 1952, "max_model_len": 20_000, "concurrency": 1.56}


def test_memory_summary_rows():
    assert _read(SUMMARY_MB) == {"allocated": 1062 * 2**20, "peak_allocated": 4877 * 2**20,
                                 "reserved": 12420 * 2**20, "peak_reserved": 12420 * 2**20}
    assert _read(SUMMARY_BYTES) == {"allocated": 1024, "peak_allocated": 133632, "reserved": 2048 * 1024,
                                    "peak_reserved": 2048 * 1024}
    # sizes are floored to whole units: the rounding is one unit
    assert figures(read(SUMMARY_MB))["peak_allocated"].resolution == 2**20


@pytest.mark.parametrize("line,figure,value", [
    ("max_memory_allocated: 123456789", "peak_allocated", 123456789),
    ("torch.cuda.max_memory_reserved() = 2147483648", "peak_reserved", 2**31),
    ("Peak allocated 12.3 GiB", "peak_allocated", round(12.3 * GIB)),
    ("peak reserved: 512 MiB", "peak_reserved", 512 * 2**20),
    ("memory_allocated 1000", "allocated", 1000),
    ("GPU peak memory allocation: 16.20 GiB", "peak_allocated", round(16.20 * GIB)),   # torchtune's log_memory_stats
    ("Peak allocated 12.5 GB", "peak_allocated", 12_500_000_000),                      # GB: 10^9 bytes
])
def test_plain_lines(line, figure, value):
    assert _read(line) == {figure: value}


def test_nvidia_smi_readings():
    # several GPUs: the largest used is read (the estimate is the most loaded GPU)
    assert _read(SMI_A100) == {"smi_used": 33717 * 2**20, "smi_total": 81252 * 2**20}
    assert _read(SMI_MIG) == {"smi_used": 14366 * 2**20, "smi_total": 19968 * 2**20}    # not BAR1's 4 MiB
    # --query-gpu=memory.used,memory.total --format=csv (the format `nvidia-smi --help-query-gpu` documents; the
    # numbers made up)
    csv = "memory.used [MiB], memory.total [MiB]\n70012 MiB, 81559 MiB\n71234 MiB, 81559 MiB\n"
    assert _read(csv) == {"smi_used": 71234 * 2**20, "smi_total": 81559 * 2**20}
    assert _read("memory.used [MiB]\n12345 MiB\n") == {"smi_used": 12345 * 2**20}
    assert _read(PYNVML_BERT) == {"smi_used": 14949 * 2**20}


@pytest.mark.parametrize("junk", [
    "", "hello", "Model loading took a while", "GPU KV cache size: lots of tokens", "| 12MiB / 24MiB |  |",
    "Try increasing `gpu_memory_utilization` or decreasing `max_model_len`", "max_memory_allocated: 12.5",
    "total_gpu_memory (1e400GiB)", "memory.used [MiB]\nN/A\n",
])
def test_unrecognised_text_is_refused_with_what_was_expected(junk):
    with pytest.raises(FieldError) as error:
        read(junk)
    assert error.value.key == "calibrate" and error.value.message == EXPECTED


def test_too_long_is_refused_before_reading():
    with pytest.raises(FieldError, match="at most 4,000,000"):
        read("x" * (MAX_CHARS + 1))


def test_every_reading_names_its_source():
    for pasted in (VLLM_V1_A100, VLLM_V0_H100, VLLM_TABLE_H100, VLLM_064_3090, SUMMARY_MB, SMI_A100, PYNVML_BERT,
                   "max_memory_allocated: 1"):
        for reading in read(pasted):
            assert reading.source in SOURCES and reading.line >= 1 and reading.excerpt


# ---- measured against estimated, and the overrides ------------------------------------------------------------------

def test_vllm_v1_log_against_its_setup():
    cal = calibrate(_values(GCE_SETUP), VLLM_V1_A100)
    rows = {row.figure: row for row in cal.rows}
    est = estimate_values(_values(GCE_SETUP))
    assert rows["weights"].estimated == est.components["weights"]
    assert rows["kv_tokens"].estimated == est.vllm["kv_cache_tokens"]
    assert rows["max_model_len"].measured == rows["max_model_len"].estimated == 131_072
    # the weights' difference has no key yet: named, not guessed into another key
    assert rows["weights"].key == "" and rows["weights"].proposed == "weight_bytes"
    assert cal.overrides == () and cal.checks == ()


def test_vllm_figures_beside_a_setup_that_is_not_vllm():
    cal = calibrate(_values({"model": "llama-3.1-8b"}), VLLM_V1_A100)
    assert ("not_vllm", {}) in cal.notes


def test_vllm_log_with_its_setting_and_nvidia_smi_reproduces_what_lies_outside_the_budget():
    # PR 10511's H100 log; the setup says gpu_util 0.95, the log 0.90. The nvidia-smi line is made up for the
    # arithmetic (no published pair of both from one run was found).
    smi = "| N/A   30C    P0   120W / 700W |  74100MiB / 81559MiB |     0%      Default |\n"
    values = _values({"model": "llama-3-8b", "mode": "infer", "engine": "vllm", "gpu": "h100-sxm-80gb",
                      "gpu_util": "0.95"})
    cal = calibrate(values, VLLM_TABLE_H100 + smi)
    overrides = dict(cal.overrides)
    assert overrides["gpu_util"] == "0.9"
    outside = 74100 * 2**20 - round(71.29 * GIB)
    assert overrides["overhead"] == str(outside)
    # re-estimated with them: the setting and what lies outside vLLM's budget are the measured ones
    new = estimate_values(apply(values, overrides))
    assert new.total_bytes - new.peak_bytes == outside
    assert {c.figure: (c.measured, c.calibrated) for c in cal.checks} == {"gpu_util": (0.9, 0.9),
                                                                          "outside": (outside, outside)}
    # what has no key yet is named with the key it would take
    rows = {row.figure: row for row in cal.rows}
    assert rows["non_torch"].proposed == "vllm_non_torch" and rows["activation_peak"].proposed == "vllm_activation_peak"


def _measured_case(label):
    case = next(c for c in json.loads((ROOT / "validation" / "measured.json").read_text())["cases"]
                if c["label"] == label)
    return parse(compare.measured_inputs(case["inputs"])), case["peak_bytes"]


@pytest.mark.parametrize("label", ["llama-3.2-1b bf16 adamw", "gpt2 fp32 sgd b1s128", "qwen2.5-0.5b fp32 adamw b4s1024"])
def test_calibrated_training_estimate_equals_the_measured_peak(label):
    # validation/measured.json: each case's peak as measure.py recorded it (MemTracker, max_memory_allocated's view)
    values, peak = _measured_case(label)
    cal = calibrate(values, f"max_memory_allocated: {peak}\n")
    overrides = dict(cal.overrides)
    assert overrides["activations"] == "per-sample"
    calibrated = estimate_values(apply(values, overrides)).peak_bytes
    # act_per_sample is whole bytes a sample: equal, or under by less than one byte a sample
    assert 0 <= peak - calibrated < values["batch"]
    if (peak - calibrated) == 0:
        assert [(c.figure, c.measured, c.calibrated) for c in cal.checks] == [("peak_allocated", peak, peak)]
    else:
        assert ("per_sample_rounding", {"bytes": peak - calibrated, "batch": values["batch"]}) in cal.notes


def test_calibrated_total_equals_nvidia_smi_exactly():
    values, peak = _measured_case("llama-3.2-1b bf16 adamw")
    smi = "| N/A   34C    P0   120W / 700W |  23107MiB / 81559MiB |     3%      Default |\n"   # made up
    cal = calibrate(values, f"max_memory_allocated: {peak}\nmax_memory_reserved: {peak + 2**30}\n" + smi)
    new = estimate_values(apply(values, dict(cal.overrides)))
    assert new.peak_bytes == peak and new.total_bytes == 23107 * 2**20
    checks = {c.figure: (c.measured, c.calibrated) for c in cal.checks}
    assert checks == {"peak_allocated": (peak, peak), "smi_used": (23107 * 2**20, 23107 * 2**20)}
    rows = {row.figure: row for row in cal.rows}
    assert rows["allocator_cache"].measured == 2**30
    # one overhead key carries the cache and the context together: the reserved view, the cache and the context are
    # not re-estimated apart (a training run's context row read 0 and its cache row the two together before)
    for figure in ("peak_reserved", "allocator_cache", "context"):
        assert (rows[figure].key, rows[figure].calibrated, rows[figure].proposed) == ("overhead", None, "")
    shown = {row["label"]: row for row in display(cal)["rows"]}
    assert shown["CUDA context and NCCL (nvidia-smi - reserved)"]["calibrated"] == "-"
    assert "as one figure" in shown["Allocator cache (reserved - allocated)"]["override"]


def test_pytorch_figures_without_nvidia_smi_keep_the_estimated_context():
    values, peak = _measured_case("llama-3.2-1b bf16 adamw")
    est = estimate_values(values)
    # pytorch issue 35901's table with its peaks replaced by this case's (allocated) and 1 GiB more (reserved)
    pasted = SUMMARY_MB.replace("4877 MB", f"{peak // 2**20} MB").replace("12420 MB", f"{peak // 2**20 + 1024} MB")
    cal = calibrate(values, pasted)
    overrides = dict(cal.overrides)
    cache = 2**30
    assert int(overrides["overhead"]) == cache + est.total_bytes - est.reserved_bytes
    assert any(what == "reserved_only" for what, _ in cal.notes)


def test_readings_of_two_runs_make_no_override():
    values, peak = _measured_case("llama-3.2-1b bf16 adamw")
    cal = calibrate(values, SUMMARY_MB.replace("4877 MB", f"{peak // 2**20} MB"))     # reserved under allocated
    assert "overhead" not in dict(cal.overrides) and cal.notes[-1][0] == "negative"


def test_nvidia_smi_alone_is_not_split():
    values = parse(dict(compare.parse_qsl(compare.READINGS[0][1])))
    cal = calibrate(values, PYNVML_BERT)
    assert cal.overrides == () and ("no_split", {}) in cal.notes
    row = cal.rows[0]
    assert row.figure == "smi_used" and row.measured == 14949 * 2**20
    assert row.estimated == estimate_values(values).total_bytes


def test_a_peak_below_everything_but_the_activations_is_not_put_in_them():
    values = _values({"model": "llama-3.2-1b"})
    assert solve_activations(values, 10**6) is None
    cal = calibrate(values, "max_memory_allocated: 1000000")
    assert cal.overrides == () and cal.notes[0][0] == "activations_not_attributable"


def test_display_words_every_row_and_note():
    values, peak = _measured_case("llama-3.2-1b bf16 adamw")
    cal = calibrate(values, f"max_memory_allocated: {peak}\n" + SMI_A100)
    shown = display(cal)
    assert shown["overrides"].startswith("activations=per-sample act_per_sample=")
    assert all(row["label"] and row["measured"] for row in shown["rows"])
    printed = text(shown, "model=llama-3.2-1b")
    assert "python -m pycore model=llama-3.2-1b activations=per-sample" in printed and "(equal)" in printed
    assert "sent nowhere" in printed


# ---- the command line ----------------------------------------------------------------------------------------------

def test_command_line_prints_the_table_and_the_overrides_survive_a_rerun(tmp_path, capsys):
    values, peak = _measured_case("gpt2 fp32 sgd b1s128")
    words = [f"{k}={v}" for k, v in compare.measured_inputs(
        next(c for c in json.loads((ROOT / "validation" / "measured.json").read_text())["cases"]
             if c["label"] == "gpt2 fp32 sgd b1s128")["inputs"]).items()]
    pasted = tmp_path / "run.txt"
    pasted.write_text(f"max_memory_allocated: {peak}\n| N/A 30C P0 99W / 700W |  9000MiB / 81559MiB |  1%  Default |\n")
    assert cli.main(["--calibrate", str(pasted), *words]) == 0
    out = capsys.readouterr().out
    assert "measured" in out and "Peak allocated (max_memory_allocated)" in out
    overrides = next(line for line in out.splitlines() if line.startswith("  python -m pycore")).split()[3 + len(words):]
    assert cli.main(["--json", *words, *overrides]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["total_bytes"] == 9000 * 2**20
    assert again["peak_bytes"] > peak - values["batch"]
    assert cli.main(["--calibrate", str(pasted), "--json", *words]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["overrides"]["overhead"] and shown["display"]["rows"]


@pytest.mark.parametrize("make,message", [
    (lambda p: p.write_text("nothing here\n"), "no figure recognised"),
    (lambda p: p.mkdir(), "not a regular file"),
    (lambda p: None, "not a regular file"),
])
def test_command_line_refuses_by_name(tmp_path, capsys, make, message):
    path = tmp_path / "pasted"
    make(path)
    assert cli.main(["--calibrate", str(path), "model=gpt2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err


def test_command_line_needs_a_file(capsys):
    assert cli.main(["--calibrate"]) == 2
    assert "takes a FILE" in capsys.readouterr().err


# ---- fuzz: random, truncated and mutated text -----------------------------------------------------------------------

EXAMPLES = [VLLM_V1_A100, VLLM_V1_L40S, VLLM_V0_H100, VLLM_TABLE_H100, VLLM_064_3090, VLLM_QWEN3, SUMMARY_MB,
            SUMMARY_BYTES, SMI_A100, SMI_MIG, PYNVML_BERT, "memory.used [MiB], memory.total [MiB]\n1 MiB, 2 MiB\n"]
FUZZ_SETUPS = [_values(GCE_SETUP), _values({"model": "gpt2", "seq": "128"})]


def _read_or_refuse(pasted):
    try:
        found = read(pasted)
    except FieldError as error:
        assert error.key == "calibrate" and error.message
        return None
    assert found and all(r.source in SOURCES for r in found)
    return found


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_fuzz_random_text(pasted):
    count_fuzz("calibrate")
    _read_or_refuse(pasted)


@settings(max_examples=300, deadline=4000, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(EXAMPLES))), st.data())
def test_fuzz_truncated_and_mutated_examples(which, data):
    count_fuzz("calibrate")
    example = EXAMPLES[which]
    cut = data.draw(st.integers(0, len(example)))
    at = data.draw(st.integers(0, cut))
    insert = data.draw(st.text(max_size=8))
    pasted = example[:at] + insert + example[at:cut]
    if _read_or_refuse(pasted) is None:
        return
    values = FUZZ_SETUPS[data.draw(st.integers(0, len(FUZZ_SETUPS) - 1))]
    cal = calibrate(values, pasted)
    shown = display(cal)
    assert text(shown)
    if cal.overrides:
        apply(values, dict(cal.overrides))       # the overrides are values the schema takes


def test_a_long_hostile_text_is_read_quickly():
    hostile = ("Model loading took " + "9" * 1500 + " GiB\n" + "| " + "1" * 1000 + "MiB / " + "|" * 500 + "\n"
               + "max_memory_allocated" + " " * 1800 + "1\n") * 200
    started = time.perf_counter()
    _read_or_refuse(hostile)
    _read_or_refuse("x" * (MAX_CHARS - 10))
    # each pattern's words, then a long run of what its quantifiers take, then no number: the worst backtracking
    words = ["max_memory_allocated", "peak allocated", "non_torch_memory", "total_gpu_memory", "Model loading took",
             "gpu_memory_utilization (0.9", "GPU KV cache size:", "Maximum concurrency for", "| Allocated memory |",
             "kv_cache_size=", "GPU blocks:", "|"]
    lines = [(word + filler * 2000)[:1999] + "x" for word in words for filler in (" ", "1", "=", "|", "0.", "\t")]
    _read_or_refuse("\n".join(lines * (MAX_CHARS // (2000 * len(lines)))))
    assert time.perf_counter() - started < 3


def test_the_printed_command_runs_when_an_override_replaces_a_given_key(tmp_path, capsys):
    # PR 10511's H100 log (gpu_memory_utilization 0.90) beside a setup that says 0.95
    pasted = tmp_path / "log.txt"
    pasted.write_text(VLLM_TABLE_H100)
    setup = ["model=llama-3-8b", "mode=infer", "engine=vllm", "gpu_util=0.95"]
    assert cli.main(["--calibrate", str(pasted), *setup]) == 0
    command = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("  python -m pycore"))
    words = command.split()[3:]
    assert words == ["model=llama-3-8b", "mode=infer", "engine=vllm", "gpu_util=0.9"]
    assert cli.main(words) == 0


def test_command_line_reads_stdin_and_the_equals_form(tmp_path, capsys, monkeypatch):
    import io
    monkeypatch.setattr(sys, "stdin", io.StringIO(VLLM_V1_A100))
    setup = [f"{key}={value}" for key, value in GCE_SETUP.items()]
    assert cli.main(["--calibrate", "-", *setup]) == 0
    assert "KV cache tokens" in capsys.readouterr().out
    pasted = tmp_path / "log.txt"
    pasted.write_text(VLLM_QWEN3)
    assert cli.main([f"--calibrate={pasted}", "--json", "model=qwen3-235b-a22b", "mode=infer", "engine=vllm",
                     "tp=4", "quant=fp8"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [row["figure"] for row in shown["rows"]] == ["kv_cache", "kv_tokens"]
    assert shown["sources"]["vllm_kv_report"] == SOURCES["vllm_kv_report"]
