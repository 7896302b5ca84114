"""vLLM's start-up check and the model's positions (issue 27).

vLLM refuses to start when its KV cache cannot hold one request of max_model_len
(vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory, v0.11: a ValueError naming the estimated maximum
model length); a learned position table (GPT-2: 1,024 rows, BERT: 512) cannot embed a longer sequence.
"""

import json
import subprocess
import sys

from pycore import FieldError, estimate, parse
from pycore.answers.answer import answer
from pycore.answers.what_fits import what_fits
from pycore.memory.estimate import estimate_values
from pycore.output import web

REFUSED = {"model": "llama-3.1-70b", "mode": "infer", "engine": "vllm", "tp": "2", "seq": "32768"}


def test_vllm_would_refuse_to_start_and_says_the_longest_it_accepts():
    # Issue 27's example: "Maximum concurrency 0.64x", yet it was called tight, GPUs needed 2, plan tp=2.
    result = estimate(REFUSED)
    assert result.vllm["max_concurrency"] < 1 and not result.vllm["starts"]
    longest = result.vllm["longest_max_model_len"]
    assert longest == result.vllm["kv_cache_tokens"] and longest < 32768 + 256 and longest % 16 == 0
    assert result.refused.startswith("vLLM would refuse to start") and f"{longest:,}" in result.refused
    assert result.refused in result.warnings
    payload = json.loads(web.run("&".join(f"{k}={v}" for k, v in REFUSED.items())))
    chosen = next(g for g in payload["gpus"] if g["chosen"])
    assert chosen["status"] == "no" and not chosen["fits"] and chosen["why"] == result.refused
    assert chosen["verdict"].startswith("vLLM would refuse to start on ")
    headline = json.loads(web.headline("&".join(f"{k}={v}" for k, v in REFUSED.items())))
    assert headline["gpus"][0]["status"] == "no"


def test_gpus_needed_the_plan_and_what_fits_require_a_start():
    values = parse(REFUSED)
    found = answer(values, estimate_values(values))
    assert not found["fits"]
    assert found["min_tp"] > 2 and found["gpus_needed"] > 2
    for option in found["plan"]:
        assert estimate({**REFUSED, **option["query"]}).vllm["starts"]
    assert any(line.startswith("ValueError: To serve at least one request") for line in found["vllm_log"])
    rows = {r["id"]: r for r in what_fits(parse({**REFUSED, "model": "llama-3.1-8b"}), 2)}
    assert rows["llama-3.1-70b"]["status"] == "no" and rows["llama-3.1-70b"]["note"].startswith("vLLM would refuse")


def test_a_request_that_fits_starts():
    result = estimate({**REFUSED, "seq": "8192"})
    assert result.vllm["starts"] and not result.refused


def test_learned_positions_refuse_a_longer_sequence():
    for inputs, limit in (({"model": "gpt2"}, 1024), ({"model": "bert-base-uncased", "seq": "1024"}, 512),
                          ({"model": "gpt2", "mode": "infer", "seq": "1000"}, 1024 - 256)):
        try:
            estimate(inputs)
        except FieldError as error:
            assert error.key == "seq" and f"at most {limit:,}" in error.message and error.fallback == limit
        else:
            raise AssertionError(f"{inputs} was estimated beyond its positions")
    assert estimate({"model": "gpt2", "seq": "1024"}).total_bytes > 0


def test_the_command_line_and_the_page_name_the_field_and_keep_the_model():
    # Issue 27: `python -m pycore model=gpt2` (default seq 2048, 1,024 positions) answered 5.94 GiB as fitting.
    done = subprocess.run([sys.executable, "-m", "pycore", "model=gpt2"], capture_output=True, text=True)
    assert done.returncode == 2 and "seq: gpt2 has 1,024 learned positions" in done.stderr
    payload = json.loads(web.run("model=gpt2"))
    assert "1,024 learned positions" in payload["errors"]["seq"]
    assert dict(payload["query"])["model"] == "gpt2" and dict(payload["query"])["seq"] == "1024"


def test_what_fits_does_not_list_a_model_past_its_positions():
    rows = {r["id"]: r for r in what_fits(parse({"seq": "2048"}), 1)}
    assert rows["gpt2"]["total_bytes"] is None and "learned positions" in rows["gpt2"]["error"]


def test_searches_stop_at_the_positions():
    values = parse({"model": "gpt2", "seq": "512"})
    found = answer(values, estimate_values(values))
    assert found["max_seq"] is not None and found["max_seq"] <= 1024


def test_a_vllm_engine_that_starts_fits_rather_than_tight():
    # vLLM pre-allocates gpu_memory_utilization (0.9 by default) of the GPU and gives what the weights and its
    # profiling run leave to the KV cache, so its total is always above 90% of the usable memory; once its start-up
    # check passes, no fragmentation tips it over: "fits", on the chosen GPU (the page's header and its list) and in
    # what fits, where a transformers setup of the same share would be "tight"
    from pycore.answers.fit import gpu_fit, gpu_fits
    values = parse({"model": "llama-3.1-8b", "mode": "infer", "engine": "vllm"})
    result = estimate_values(values)
    assert not result.refused and result.total_bytes > 0.9 * 85_520_809_984
    rows = gpu_fits(result.total_bytes, values["gpu"], result.refused, values)
    assert next(r for r in rows if r["chosen"])["status"] == "fits"
    header = json.loads(web.headline("model=llama-3.1-8b&mode=infer&engine=vllm"))
    assert header["gpus"][0]["status"] == "fits"
    assert gpu_fit(result.total_bytes, "h100-sxm-80gb", "h100-sxm-80gb")["status"] == "tight"    # the same bytes, hf
    assert all(r["status"] != "tight" for r in what_fits(values, 1))


def test_a_refused_vllm_setups_launch_line_says_it_starts_nothing():
    # the vllm serve line is the setup in the form; when vLLM's start-up check would stop it (here one request of
    # 33,024 tokens needs more KV cache than the 3.22 GiB left on two H100s), the page's note and the command line
    # say so with the reason and the longest max_model_len it would accept
    query = "model=llama-3.1-70b&mode=infer&engine=vllm&tp=2&seq=32768"
    launched = json.loads(web.launch(query))
    assert launched["blocks"][0]["text"].startswith("vllm serve")
    assert launched["note"].startswith("This line starts nothing as it stands: vLLM would refuse to start")
    assert "21,120" in launched["note"]
    assert json.loads(web.launch("model=llama-3.1-8b&mode=infer&engine=vllm"))["note"] == ""
    done = subprocess.run([sys.executable, "-m", "pycore", "--export", "vllm", *query.split("&")], capture_output=True,
                          text=True, check=True)
    assert done.stdout.startswith("vllm serve") and "starts nothing as it stands" in done.stderr
